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
