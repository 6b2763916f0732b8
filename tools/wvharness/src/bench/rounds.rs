//! Alternating rounds: every goal row is measured in rounds that take turns with rounds of its
//! baseline, in one sitting.
//!
//! The machine drifts (other builds start and stop, the host moves vCPUs), and a ratio of a
//! row measured now to a limit measured a minute ago carries that drift in it. Measured in
//! turns — row then baseline in one round, baseline then row in the next, so a steady change
//! in load over the sitting hits both sides alike — each round has its own ratio, taken while
//! the machine was in one state. A row's ratio is the **median of its per-round ratios** (each
//! per-round value is itself a per-iteration median, or a rate for the bandwidth rows); the
//! value and the baseline printed beside it are the medians of the per-round values. The
//! spread is the smallest and the largest per-round ratio: a goal met only at one end of it
//! was met by the moment, not by the measurement.
//!
//! Where a row is held to "no difference" (the filter overhead), the run also gives a 95 %
//! confidence interval of the ratio: a Student-t interval on the per-round log-ratios (the
//! rounds are independent pairs; logs make a ratio of 0.5 and one of 2 equally far from 1).

use serde::Serialize;

use super::{BenchRow, Goal};
use crate::baseline::Measured;

/// One side of one round: its median (or rate) and, where it has per-iteration samples, its
/// 99th percentile.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    /// The per-iteration median (or the rate) of the round.
    pub mid: f64,
    /// The round's 99th percentile (for a rate: the 1st percentile, the slow end).
    pub tail: Option<f64>,
}

impl Stat {
    /// A value with no tail.
    pub fn plain(mid: f64) -> Stat {
        Stat { mid, tail: None }
    }

    /// The median and 99th percentile of per-iteration times, times `scale`.
    pub fn times(m: &Measured, scale: f64) -> Stat {
        Stat {
            mid: m.median() * scale,
            tail: Some(m.p99() * scale),
        }
    }

    /// The median and 1st percentile (the slow end) of per-sample rates, times `scale`.
    pub fn rates(m: &Measured, scale: f64) -> Stat {
        Stat {
            mid: m.median() * scale,
            tail: Some(m.p1() * scale),
        }
    }
}

/// One round: the row's side and its baseline's.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// The row.
    pub value: Stat,
    /// Its baseline.
    pub base: Stat,
}

impl Round {
    /// `value / base`, when the baseline is a positive finite number.
    pub fn ratio(&self) -> Option<f64> {
        (self.base.mid > 0.0 && self.base.mid.is_finite()).then(|| self.value.mid / self.base.mid)
    }
}

/// Runs `rounds` rounds of `row` and `base` in turns: row first in even rounds, baseline first
/// in odd ones. Each closure gets the round's index.
pub fn alternate<RA, RB>(
    rounds: usize,
    mut row: impl FnMut(usize) -> Result<RA, String>,
    mut base: impl FnMut(usize) -> Result<RB, String>,
) -> Result<Vec<(RA, RB)>, String> {
    (0..rounds.max(1))
        .map(|i| {
            if i % 2 == 0 {
                let a = row(i)?;
                Ok((a, base(i)?))
            } else {
                let b = base(i)?;
                Ok((row(i)?, b))
            }
        })
        .collect()
}

/// How the per-round numbers of a row spread.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    /// Rounds measured (each one row round and one baseline round).
    pub rounds: usize,
    /// How `ratio` of the row is formed from the rounds.
    pub ratio_of: &'static str,
    /// The smallest and largest per-round ratio.
    pub ratio: [f64; 2],
    /// The smallest and largest per-round value (`unit`).
    pub value: [f64; 2],
    /// The smallest and largest per-round baseline (`unit`).
    pub baseline: [f64; 2],
}

/// What [`Spread::ratio_of`] says.
pub const RATIO_OF: &str = "median of per-round ratios";

/// A confidence interval of a row's ratio.
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    /// The confidence level (0.95).
    pub level: f64,
    /// The lower end of the ratio.
    pub low: f64,
    /// The upper end of the ratio.
    pub high: f64,
    /// How it was computed.
    pub method: &'static str,
}

/// The true median (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn range(v: impl Iterator<Item = f64>) -> [f64; 2] {
    v.fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], x| {
        [lo.min(x), hi.max(x)]
    })
}

/// The two-sided 97.5 % quantile of Student's t with `df` degrees of freedom.
fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        d if d <= T.len() => T[d - 1],
        _ => 1.96,
    }
}

/// The 95 % Student-t interval of the geometric mean of the per-round ratios, from their logs.
pub fn ratio_interval(rounds: &[Round]) -> Option<Interval> {
    let logs: Vec<f64> = rounds
        .iter()
        .filter_map(Round::ratio)
        .filter(|r| *r > 0.0)
        .map(f64::ln)
        .collect();
    let n = logs.len();
    if n < 2 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_975(n - 1) * (var / n as f64).sqrt();
    Some(Interval {
        level: 0.95,
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        method: "Student t on the per-round log-ratios",
    })
}

impl BenchRow {
    /// A row from alternating rounds: value, baseline and their tails are medians of the
    /// per-round ones, the ratio the median of the per-round ratios, and the spread beside it.
    #[allow(clippy::too_many_arguments)]
    pub fn from_rounds(
        group: &'static str,
        name: impl Into<String>,
        unit: &'static str,
        baseline: impl Into<String>,
        rounds: &[Round],
        goal: Option<Goal>,
    ) -> BenchRow {
        let tails = |f: fn(&Round) -> Option<f64>| -> Option<f64> {
            let t: Option<Vec<f64>> = rounds.iter().map(f).collect();
            t.filter(|t| !t.is_empty()).map(|t| median(&t))
        };
        let ratios: Vec<f64> = rounds.iter().filter_map(Round::ratio).collect();
        let ratio = (!ratios.is_empty()).then(|| median(&ratios));
        BenchRow {
            group,
            name: name.into(),
            value: Some(median(
                &rounds.iter().map(|r| r.value.mid).collect::<Vec<_>>(),
            )),
            p99: tails(|r| r.value.tail),
            unit,
            baseline: baseline.into(),
            baseline_value: Some(median(
                &rounds.iter().map(|r| r.base.mid).collect::<Vec<_>>(),
            )),
            baseline_p99: tails(|r| r.base.tail),
            ratio,
            goal: goal.map(Goal::text),
            met: goal.zip(ratio).map(|(g, r)| g.met(r)),
            note: None,
            spread: Some(Spread {
                rounds: rounds.len(),
                ratio_of: RATIO_OF,
                ratio: range(ratios.iter().copied()),
                value: range(rounds.iter().map(|r| r.value.mid)),
                baseline: range(rounds.iter().map(|r| r.base.mid)),
            }),
            interval: None,
        }
    }

    /// With the 95 % interval of the ratio; for a "±" goal the row then meets it only if the
    /// interval also excludes a cost above the goal's bound.
    pub fn with_interval(mut self, rounds: &[Round], goal: Goal) -> BenchRow {
        self.interval = ratio_interval(rounds);
        if let (Goal::Within(g), Some(i), Some(m)) = (goal, &self.interval, self.met) {
            self.met = Some(m && i.high <= 1.0 + g);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(v: f64, b: f64) -> Round {
        Round {
            value: Stat::plain(v),
            base: Stat::plain(b),
        }
    }

    #[test]
    fn rounds_alternate_their_order() {
        let order = std::cell::RefCell::new(Vec::new());
        alternate(
            4,
            |i| {
                order.borrow_mut().push(('a', i));
                Ok(())
            },
            |i| {
                order.borrow_mut().push(('b', i));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(
            order.into_inner(),
            [
                ('a', 0),
                ('b', 0),
                ('b', 1),
                ('a', 1),
                ('a', 2),
                ('b', 2),
                ('b', 3),
                ('a', 3)
            ]
        );
    }

    #[test]
    fn the_ratio_is_the_median_of_per_round_ratios() {
        // Per-round ratios 2, 3, 10: their median is 3; the ratio of the medians would be 2.5.
        let rounds = [round(2.0, 1.0), round(6.0, 2.0), round(40.0, 4.0)];
        let row = BenchRow::from_rounds("g", "r", "ns", "b", &rounds, Some(Goal::AtMost(3.0)));
        assert_eq!(row.ratio, Some(3.0));
        assert_eq!(row.value, Some(6.0));
        assert_eq!(row.baseline_value, Some(2.0));
        assert_eq!(row.met, Some(true));
        let s = row.spread.unwrap();
        assert_eq!((s.rounds, s.ratio, s.value), (3, [2.0, 10.0], [2.0, 40.0]));
    }

    #[test]
    fn a_within_goal_needs_the_interval_below_its_bound() {
        let tight = [round(1.0, 1.0), round(1.005, 1.0), round(0.995, 1.0)];
        let wide = [round(1.0, 1.0), round(1.3, 1.0), round(0.8, 1.0)];
        let g = Goal::Within(0.02);
        let row = |r: &[Round]| BenchRow::from_rounds("g", "r", "ns", "b", r, Some(g));
        let t = row(&tight).with_interval(&tight, g);
        let i = t.interval.clone().unwrap();
        assert!(i.low < 1.0 && i.high > 1.0 && i.high < 1.1, "{i:?}");
        assert_eq!(t.met, Some(true));
        // Median ratio 1.0 meets ±2 %, but the interval reaches far above 1.02.
        let w = row(&wide).with_interval(&wide, g);
        assert_eq!(w.ratio, Some(1.0));
        assert_eq!(w.met, Some(false));
    }

    #[test]
    fn the_t_interval_matches_a_hand_computation() {
        // log-ratios 0, ln 2: mean ln2/2, s = ln2/√2, half width t(1)·s/√2 = 12.706·ln2/2.
        let r = [round(1.0, 1.0), round(2.0, 1.0)];
        let i = ratio_interval(&r).unwrap();
        let half = 12.706 * std::f64::consts::LN_2 / 2.0;
        let mean = std::f64::consts::LN_2 / 2.0;
        assert!((i.low - (mean - half).exp()).abs() < 1e-9);
        assert!((i.high - (mean + half).exp()).abs() < 1e-9);
    }
}
