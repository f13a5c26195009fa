//! Auto-ramp (`--scenarios auto`): how many flows one direction needs
//! before its goodput stops growing. Pure decisions on the goodput each step
//! measured; the engine runs the steps.

/// What to do after the steps so far (flows, goodput bits/s, in run order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RampNext {
    /// Run this many flows next.
    Flows(u32),
    /// Doubling `flows` gained less than the threshold (`gain`, relative,
    /// may be negative): `flows` already filled the path.
    Saturated { flows: u32, gain: f64 },
    /// `flows` is the limit and goodput was still growing.
    AtLimit { flows: u32 },
}

/// The ramp's rule: 1 flow, then double, until doubling adds less than
/// `growth` (relative) goodput or `max_flows` ran.
pub fn ramp_next(steps: &[(u32, f64)], growth: f64, max_flows: u32) -> RampNext {
    let Some(&(flows, g)) = steps.last() else {
        return RampNext::Flows(1);
    };
    if let [.., (prev_flows, prev_g), _] = steps {
        let gain = if *prev_g > 0.0 { g / prev_g - 1.0 } else if g > 0.0 { f64::INFINITY } else { 0.0 };
        if gain < growth {
            return RampNext::Saturated { flows: *prev_flows, gain };
        }
    }
    if flows >= max_flows {
        return RampNext::AtLimit { flows };
    }
    RampNext::Flows((flows * 2).min(max_flows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ramp_doubles_until_the_gain_is_small_or_the_limit() {
        assert_eq!(ramp_next(&[], 0.05, 32), RampNext::Flows(1));
        assert_eq!(ramp_next(&[(1, 5e6)], 0.05, 32), RampNext::Flows(2));
        // 5 -> 9 Mbit/s (+80%): keep going.
        assert_eq!(ramp_next(&[(1, 5e6), (2, 9e6)], 0.05, 32), RampNext::Flows(4));
        // 9 -> 9.3 (+3.3%): 2 flows already filled it.
        match ramp_next(&[(1, 5e6), (2, 9e6), (4, 9.3e6)], 0.05, 32) {
            RampNext::Saturated { flows, gain } => {
                assert_eq!(flows, 2);
                assert!((gain - 0.3 / 9.0).abs() < 1e-12, "{gain}");
            }
            other => panic!("{other:?}"),
        }
        // Less goodput with more flows: saturated too, with a negative gain.
        assert!(matches!(ramp_next(&[(1, 9e6), (2, 8e6)], 0.05, 32), RampNext::Saturated { flows: 1, gain } if gain < 0.0));
        // Still growing at the limit.
        assert_eq!(ramp_next(&[(4, 1e6), (8, 2e6)], 0.05, 8), RampNext::AtLimit { flows: 8 });
        // A limit that is not a power of two is the last step.
        assert_eq!(ramp_next(&[(4, 1e6), (8, 2e6)], 0.05, 10), RampNext::Flows(10));
        // Nothing measured then something: growing.
        assert_eq!(ramp_next(&[(1, 0.0), (2, 1e6)], 0.05, 32), RampNext::Flows(4));
    }
}
