//! Properties of core's pricing rules over their whole input range. The shared vectors
//! (`conformance/vectors/pricing.json`) run through the bridge's JSON entry points, the ones
//! every host calls (`cargo test -p cycles-bridge pricing_json`).

use cycles_core::pricing::caps::lower_bound;
use cycles_core::pricing::Price;
use cycles_core::Caps;
use proptest::prelude::*;

proptest! {
    /// One rounding up per call: never under the exact cost, under it plus one unit.
    #[test]
    fn cost_is_the_exact_cost_rounded_up(
        input in 0u64..1 << 40, output in 0u64..1 << 40,
        pi in 0u64..1 << 34, po in 0u64..1 << 34,
    ) {
        let p = Price { input_per_mtok: pi, output_per_mtok: po };
        let exact = u128::from(input) * u128::from(pi) + u128::from(output) * u128::from(po);
        match p.cost(input, output) {
            Ok(c) => {
                let scaled = u128::try_from(c).unwrap() * 1_000_000;
                prop_assert!(scaled >= exact && scaled < exact + 1_000_000);
            }
            Err(_) => prop_assert!(exact.div_ceil(1_000_000) > i64::MAX as u128),
        }
    }

    /// Caps only ever lower a bound, and `changed` is exactly "differs".
    #[test]
    fn caps_never_raise_the_bound(bound in proptest::option::of(0u64..1 << 40), cap in proptest::option::of(0i64..1 << 40)) {
        let caps = Caps { max_tokens: cap, ..Caps::default() };
        let c = lower_bound(bound, &caps).unwrap();
        if let (Some(b), Some(l)) = (bound, c.bound) {
            prop_assert!(l <= b);
        }
        prop_assert_eq!(c.changed, c.bound != bound);
        prop_assert!(c.bound.is_some() || (bound.is_none() && cap.is_none()));
    }
}
