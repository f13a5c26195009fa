//! bloatlab-recipes (work in progress)
