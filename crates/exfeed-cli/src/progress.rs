//! The progress bar of long commands (`convert`, `read`): drawn on stderr only when stderr is a
//! terminal, and only once the command has run longer than [`PROGRESS_DELAY`] (quick runs
//! print nothing).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// What the bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Input bytes.
    Bytes,
    /// Samples delivered.
    Samples,
}

pub(crate) struct Progress {
    bar: ProgressBar,
    /// Where to draw once the delay has passed (None: never, e.g. stderr is not a terminal).
    target: Option<DrawTarget>,
    start: Instant,
    delay: Duration,
}

pub(crate) type DrawTarget = Box<dyn FnOnce() -> ProgressDrawTarget>;

const PROGRESS_DELAY: Duration = Duration::from_secs(1);

impl Progress {
    /// A bar on stderr if it is a terminal, towards `total` when known (with an ETA).
    pub(crate) fn for_stderr(total: Option<u64>, unit: Unit) -> Self {
        let target: Option<DrawTarget> = if std::io::stderr().is_terminal() {
            Some(Box::new(ProgressDrawTarget::stderr))
        } else {
            None
        };
        // The delay can be changed for the tests (`EXFEED_PROGRESS_DELAY_MS`).
        let delay = std::env::var("EXFEED_PROGRESS_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(PROGRESS_DELAY, Duration::from_millis);
        Self::new(total, unit, target, delay)
    }

    pub(crate) fn new(
        total: Option<u64>,
        unit: Unit,
        target: Option<DrawTarget>,
        delay: Duration,
    ) -> Self {
        // Hidden until the delay has passed: indicatif draws nothing to a hidden target.
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        let template = match (unit, total.is_some()) {
            (Unit::Bytes, true) => {
                "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} ETA {eta}"
            }
            (Unit::Bytes, false) => "{spinner} {binary_bytes} {binary_bytes_per_sec}",
            (Unit::Samples, true) => "{bar:30} {human_pos}/{human_len} samples {per_sec} ETA {eta}",
            (Unit::Samples, false) => "{spinner} {human_pos} samples {per_sec}",
        };
        bar.set_style(ProgressStyle::with_template(template).expect("a valid template"));
        Progress {
            bar,
            target,
            start: Instant::now(),
            delay,
        }
    }

    /// Records the amount done; shows the bar if the command has become long.
    pub(crate) fn set(&mut self, done: u64) {
        self.bar.set_position(done);
        if self.target.is_some() && self.start.elapsed() >= self.delay {
            if let Some(target) = self.target.take() {
                self.bar.set_draw_target(target());
                // Keeps rate and ETA moving between (possibly slow) updates.
                self.bar.enable_steady_tick(Duration::from_millis(500));
            }
        }
    }

    /// Removes the bar (before the summary is printed).
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Is the bar drawing nowhere?
    #[cfg(test)]
    pub(crate) fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Draws now (tests).
    #[cfg(test)]
    pub(crate) fn tick(&self) {
        self.bar.tick();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A terminal that records what is written to it.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Recorder(pub(crate) Arc<Mutex<String>>);

    impl indicatif::TermLike for Recorder {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            self.0.lock().unwrap().push('\n');
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    pub(crate) fn progress(
        term: &Recorder,
        total: Option<u64>,
        unit: Unit,
        delay: Duration,
    ) -> Progress {
        let term = term.clone();
        Progress::new(
            total,
            unit,
            Some(Box::new(move || {
                ProgressDrawTarget::term_like(Box::new(term))
            })),
            delay,
        )
    }

    #[test]
    fn bar_gets_the_terminal_once_the_delay_has_passed() {
        for (total, unit) in [
            (Some(1000), Unit::Bytes),
            (Some(1000), Unit::Samples),
            (None, Unit::Samples),
        ] {
            let term = Recorder::default();
            let mut p = progress(&term, total, unit, Duration::ZERO);
            assert!(p.is_hidden());
            p.set(500);
            // The bar now draws to the terminal (what it draws is indicatif's business).
            assert!(!p.is_hidden(), "{unit:?}");
            p.finish();
        }
    }

    #[test]
    fn quick_runs_draw_nothing() {
        let term = Recorder::default();
        // A delay no test run reaches.
        let mut p = progress(&term, Some(1000), Unit::Bytes, Duration::from_secs(3600));
        for done in [0, 500, 1000] {
            p.set(done);
            p.tick();
        }
        assert!(p.is_hidden());
        p.finish();
        assert_eq!(*term.0.lock().unwrap(), "");
    }

    #[test]
    fn no_terminal_no_bar() {
        let mut p = Progress::new(Some(1000), Unit::Samples, None, Duration::ZERO);
        p.set(500);
        assert!(p.is_hidden());
        p.finish();
    }
}
