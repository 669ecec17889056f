//! Progress bars for long work (stderr, with rate and ETA).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub fn bar(len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// A `(stage, done, total)` callback that drives `bar` (if any) through evaluation stages.
/// Where the bar draws nothing (stderr is no terminal), each stage logs its own progress lines,
/// timed from that stage's start, so a calibration in the background says where it is.
pub fn stages(bar: &Option<ProgressBar>) -> impl FnMut(&str, usize, usize) + '_ {
    let mut stage_clock: Option<(String, Instant)> = None;
    move |stage, done, total| {
        if let Some(b) = bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(stage.to_string());
            if b.is_hidden() {
                if stage_clock.as_ref().is_none_or(|(s, _)| s != stage) {
                    stage_clock = Some((stage.to_string(), Instant::now()));
                }
                if let Some((_, started)) = &stage_clock {
                    if let Some(line) =
                        hidden_line(started.elapsed(), done as u64, total as u64, stage)
                    {
                        eprintln!("{line}");
                    }
                }
            }
        }
    }
}

/// Where stderr is not a terminal (a job in the background, a CI log) a bar draws nothing: there
/// a line goes to stderr each twentieth of the way instead (once the run has taken 10 s), so a
/// long run's log shows where it is and how long is left.
pub fn log_when_hidden(bar: &ProgressBar, done: u64, total: u64, message: &str) {
    if !bar.is_hidden() {
        return;
    }
    if let Some(line) = hidden_line(bar.elapsed(), done, total, message) {
        eprintln!("{line}");
    }
}

/// The line a hidden bar logs at `done` of `total`, `elapsed` into the work: one each
/// twentieth of the way and at the end; none before the first item is done (no rate yet) or
/// in the first 10 s (a run of seconds needs no log of its progress).
fn hidden_line(elapsed: Duration, done: u64, total: u64, message: &str) -> Option<String> {
    let step = (total / 20).max(1);
    if done == 0
        || elapsed < Duration::from_secs(10)
        || (!done.is_multiple_of(step) && done != total)
    {
        return None;
    }
    let elapsed = elapsed.as_secs();
    let left = (elapsed * (total - done.min(total)))
        .checked_div(done)
        .unwrap_or(0);
    Some(format!(
        "{done}/{total} {message} ({} elapsed, about {} left)",
        minutes(elapsed),
        minutes(left)
    ))
}

fn minutes(secs: u64) -> String {
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min", (secs + 30) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_bar_logs_each_twentieth_once_the_run_is_long() {
        let long = Duration::from_secs(120);
        assert_eq!(hidden_line(Duration::from_secs(3), 50, 100, "x"), None);
        assert_eq!(hidden_line(long, 51, 100, "x"), None);
        assert_eq!(
            hidden_line(long, 50, 100, "calibrating").as_deref(),
            Some("50/100 calibrating (2 min elapsed, about 2 min left)")
        );
        // The last item is logged even off the twentieths; nothing is left then.
        assert_eq!(
            hidden_line(long, 7, 7, "x").as_deref(),
            Some("7/7 x (2 min elapsed, about 0 s left)")
        );
        // Before any item is done there is no rate to tell the time left by.
        assert_eq!(hidden_line(long, 0, 40, "x"), None);
    }
}
