//! bloatlab-metrics (work in progress)
