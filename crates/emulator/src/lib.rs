//! bloatlab-emulator (work in progress)
