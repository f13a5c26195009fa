//! The emulator's random draws (loss, jitter, PIE's random drops, FQ
//! hashing), reproducible from a seed: the `rand` crate's small seedable
//! generator, the one generator bloatlab uses wherever it draws.
use rand::rngs::SmallRng;
use rand::{Rng as _, RngCore, SeedableRng};

#[derive(Debug, Clone)]
pub struct Rng(SmallRng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SmallRng::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform() < p
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// A fresh seed, for runs without an explicit seed (recorded in the stats).
pub fn random_seed() -> u64 {
    rand::random()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn uniform_mean_and_chance() {
        let mut r = Rng::new(7);
        let n = 100_000;
        let mean: f64 = (0..n).map(|_| r.uniform()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let hits = (0..n).filter(|_| r.chance(0.1)).count();
        assert!((hits as f64 / n as f64 - 0.1).abs() < 0.005);
        let m2: f64 = (0..n).map(|_| r.normal().powi(2)).sum::<f64>() / n as f64;
        assert!((m2 - 1.0).abs() < 0.03, "{m2}");
        assert_eq!(Rng::new(1).next_u64(), Rng::new(1).next_u64());
    }
}
