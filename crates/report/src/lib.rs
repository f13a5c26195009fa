//! bloatlab-report (work in progress)
