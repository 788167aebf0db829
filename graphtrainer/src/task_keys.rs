//! The `[train]` keys whose defaults depend on the task and on the records: weight decay,
//! early stopping and a link step's batch negatives. A job's own value always wins; the
//! defaults are argued at their constants in `schemas::job::train`.

use schemas::job::{DEFAULT_LINK_PATIENCE, TrainConfig};
use schemas::{BatchNegatives, Task};

/// The keys as this run uses them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskKeys {
    pub weight_decay: f32,
    /// Epochs without a better validation score before stopping (0: never).
    pub patience: usize,
    /// Link task only (`None` for node records).
    pub batch_negatives: BatchNegatives,
}

impl TaskKeys {
    /// `negatives`: each record's drawn negatives; `can_validate`: whether there is a
    /// validation score to stop on (validation records, with negatives for links). A link job
    /// that sets no patience stops early only where it can.
    pub fn resolve(config: &TrainConfig, task: Task, negatives: usize, can_validate: bool) -> TaskKeys {
        let default_patience = if task == Task::Link && can_validate { DEFAULT_LINK_PATIENCE } else { 0 };
        TaskKeys {
            weight_decay: config.weight_decay_for(task),
            patience: config.patience.unwrap_or(default_patience),
            batch_negatives: match task {
                Task::Node => BatchNegatives::None,
                Task::Link => config.batch_negatives_for(negatives),
            },
        }
    }

    /// How the run's log names the defaults it took.
    pub fn line(&self, config: &TrainConfig, task: Task) -> String {
        let said = |set: bool| if set { "" } else { " (default)" };
        let mut line = format!(
            "weight_decay {}{}, patience {}{}",
            self.weight_decay,
            said(config.weight_decay.is_some()),
            self.patience,
            said(config.patience.is_some())
        );
        if task == Task::Link {
            let set = config.batch_negatives.is_some() || config.in_batch_negatives.is_some();
            line += &format!(", batch_negatives {}{}", self.batch_negatives.name(), said(set));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(keys: &str) -> TrainConfig {
        toml::from_str(&format!("records = 'r'\noutput = 'o'\n{keys}")).unwrap()
    }

    #[test]
    fn defaults_follow_the_task_and_a_set_key_wins() {
        let node = TaskKeys::resolve(&config(""), Task::Node, 0, true);
        assert_eq!((node.weight_decay, node.patience), (5e-4, 0));
        let link = TaskKeys::resolve(&config(""), Task::Link, 1, true);
        assert_eq!((link.weight_decay, link.patience, link.batch_negatives), (0.0, 10, BatchNegatives::Negatives));
        let set = TaskKeys::resolve(&config("weight_decay = 0.1\npatience = 0"), Task::Link, 1, true);
        assert_eq!((set.weight_decay, set.patience), (0.1, 0));
    }

    #[test]
    fn link_negatives_fall_back_to_destinations_and_stopping_needs_validation() {
        let bare = TaskKeys::resolve(&config(""), Task::Link, 0, false);
        assert_eq!((bare.batch_negatives, bare.patience), (BatchNegatives::Destinations, 0));
        let old = |on: bool| TaskKeys::resolve(&config(&format!("in_batch_negatives = {on}")), Task::Link, 1, true);
        assert_eq!(old(true).batch_negatives, BatchNegatives::Destinations);
        assert_eq!(old(false).batch_negatives, BatchNegatives::None);
    }
}
