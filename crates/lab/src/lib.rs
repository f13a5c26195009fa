//! bloatlab-lab (work in progress)
