//! The SVG line charts plansmith writes beside its results (coverage / precision curve, loss
//! curve): one frame — title, axes, axis labels, end ticks — with the plot drawn inside.

/// Width, height and margin of every chart, in pixels.
pub(crate) const W: f64 = 560.0;
pub(crate) const H: f64 = 340.0;
pub(crate) const PAD: f64 = 56.0;

/// Maps `v` in `[lo, hi]` to the plot's x (`left .. right`).
pub(crate) fn x_at(v: f64, lo: f64, hi: f64) -> f64 {
    PAD + (v - lo) / (hi - lo).max(1e-9) * (W - 2.0 * PAD)
}

/// Maps `v` in `[lo, hi]` to the plot's y (`bottom .. top`).
pub(crate) fn y_at(v: f64, lo: f64, hi: f64) -> f64 {
    H - PAD - (v - lo) / (hi - lo).max(1e-9) * (H - 2.0 * PAD)
}

/// What a chart's frame says: labels and the values at the ends of each axis.
pub(crate) struct Frame<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Values at the left and right ends of the x axis.
    pub x_ends: (String, String),
    /// Values at the bottom and top ends of the y axis.
    pub y_ends: (String, String),
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The polyline through `points` (already in pixels).
pub(crate) fn polyline(points: impl Iterator<Item = (f64, f64)>) -> String {
    let pts: Vec<String> = points.map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    format!(
        r##"<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{}"/>"##,
        pts.join(" ")
    )
}

/// The whole SVG document: `frame` around `body` (SVG elements in pixel coordinates).
pub(crate) fn svg(frame: &Frame, body: &str) -> String {
    let (b, r, cx, cy) = (H - PAD, W - PAD, W / 2.0, H / 2.0);
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{PAD}" y="24" font-size="14">{title}</text>
<line x1="{PAD}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{b}" stroke="black"/>
<text x="{cx}" y="{lx}" font-size="12" text-anchor="middle">{x_label}</text>
<text x="14" y="{cy}" font-size="12" transform="rotate(-90 14 {cy})" text-anchor="middle">{y_label}</text>
<text x="{PAD}" y="{tx}" font-size="10">{x0}</text><text x="{r}" y="{tx}" font-size="10" text-anchor="end">{x1}</text>
<text x="{yl}" y="{b}" font-size="10" text-anchor="end">{y0}</text><text x="{yl}" y="{yt}" font-size="10" text-anchor="end">{y1}</text>
{body}
</svg>
"##,
        title = escape(frame.title),
        x_label = escape(frame.x_label),
        y_label = escape(frame.y_label),
        lx = H - 12.0,
        tx = H - PAD + 14.0,
        yl = PAD - 4.0,
        yt = PAD + 4.0,
        x0 = escape(&frame.x_ends.0),
        x1 = escape(&frame.x_ends.1),
        y0 = escape(&frame.y_ends.0),
        y1 = escape(&frame.y_ends.1),
    )
}

/// The training loss per step (written as `loss.svg` beside a LoRA planner).
pub(crate) fn loss_svg(losses: &[f64], title: &str) -> String {
    let max = losses.iter().copied().fold(0.0f64, f64::max).max(1e-9);
    let last = (losses.len().max(2) - 1) as f64;
    let line = polyline(
        losses
            .iter()
            .enumerate()
            .map(|(i, l)| (x_at(i as f64, 0.0, last), y_at(*l, 0.0, max))),
    );
    let frame = Frame {
        title,
        x_label: "optimizer step",
        y_label: "loss per reply token",
        x_ends: ("1".into(), losses.len().to_string()),
        y_ends: ("0".into(), format!("{max:.2}")),
    };
    svg(&frame, &line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_chart_has_a_point_per_step_and_escapes_its_title() {
        let s = loss_svg(&[2.0, 1.0, 0.5], "r=4 <on> a&b");
        let points = s
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(points.split_whitespace().count(), 3);
        assert!(s.contains("r=4 &lt;on&gt; a&amp;b"));
        // the first (largest) loss sits at the top-left corner of the plot
        assert!(points.starts_with(&format!("{PAD:.1},{PAD:.1}")));
    }
}
