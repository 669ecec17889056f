//! Progress bars for long work (stderr, with rate and ETA).

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
pub fn stages(bar: &Option<ProgressBar>) -> impl FnMut(&str, usize, usize) + '_ {
    move |stage, done, total| {
        if let Some(b) = bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(stage.to_string());
        }
    }
}

/// Where stderr is not a terminal (a job in the background, a CI log) a bar draws nothing: there
/// a line goes to stderr each twentieth of the way instead (once the run has taken 10 s), so a
/// long run's log shows where it is and how long is left.
pub fn log_when_hidden(bar: &ProgressBar, done: u64, total: u64, message: &str) {
    let step = (total / 20).max(1);
    // A run of seconds needs no log of its progress.
    let long = bar.elapsed() >= std::time::Duration::from_secs(10);
    if !bar.is_hidden() || !long || (!done.is_multiple_of(step) && done != total) {
        return;
    }
    let elapsed = bar.elapsed().as_secs();
    let left = (elapsed * (total - done.min(total)))
        .checked_div(done)
        .unwrap_or(0);
    eprintln!(
        "{done}/{total} {message} ({} elapsed, about {} left)",
        minutes(elapsed),
        minutes(left)
    );
}

fn minutes(secs: u64) -> String {
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min", (secs + 30) / 60)
    }
}
