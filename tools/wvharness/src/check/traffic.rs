//! (being written)

use super::Scenario;
use super::env::Env;

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    Vec::new()
}
