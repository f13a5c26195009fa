//! bloatlab-engine (work in progress)
