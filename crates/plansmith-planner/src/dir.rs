//! The planner directory: `planner.json` + `model.safetensors`, saved atomically, and the
//! default planner embedded in the binary.

use std::collections::HashMap;
use std::path::Path;

use candle_core::Device;
use plansmith_core::{Catalog, Tool};
use plansmith_lm::{AnyCodec, TinyGpt, TinyGptConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::calibrate::GateMetrics;
use crate::planner::{Planner, PlannerSettings};
use crate::PlannerError;

pub const FORMAT_VERSION: u32 = 1;
pub const MANIFEST: &str = "planner.json";
pub const WEIGHTS: &str = "model.safetensors";

/// What a planner knows about how it was made and how well it did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlannerMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<GateMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<GateMetrics>,
    #[serde(default)]
    pub training: Value,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    format_version: u32,
    family: String,
    model: TinyGptConfig,
    codec: AnyCodec,
    #[serde(flatten)]
    settings: PlannerSettings,
    catalog: Vec<Tool>,
    #[serde(flatten)]
    meta: PlannerMeta,
}

fn dir_err(path: &Path, message: impl Into<String>) -> PlannerError {
    PlannerError::Dir {
        path: path.display().to_string(),
        message: message.into(),
    }
}

impl Planner {
    /// Save atomically: everything is written to a sibling temp directory, fsynced, and
    /// renamed over `dir`; a crash leaves either the old planner or the new one.
    pub fn save(&self, dir: &Path) -> Result<(), PlannerError> {
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            family: "tiny_gpt".into(),
            model: self.model.config().clone(),
            codec: self.codec.clone(),
            settings: self.settings.clone(),
            catalog: self.catalog.tools.clone(),
            meta: self.meta.clone(),
        };
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| dir_err(parent, e.to_string()))?;
        let name = dir
            .file_name()
            .ok_or_else(|| dir_err(dir, "not a directory name"))?
            .to_string_lossy();
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| dir_err(&tmp, e.to_string()))?;
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| dir_err(dir, e.to_string()))?;
        plansmith_core::trace::write_atomic(tmp.join(MANIFEST), &json)
            .map_err(|e| dir_err(&tmp, e.to_string()))?;
        self.model.save_safetensors(&tmp.join(WEIGHTS))?;
        let old = parent.join(format!(".{name}.old-{}", std::process::id()));
        if dir.exists() {
            std::fs::rename(dir, &old).map_err(|e| dir_err(dir, e.to_string()))?;
        }
        std::fs::rename(&tmp, dir).map_err(|e| dir_err(dir, e.to_string()))?;
        let _ = std::fs::remove_dir_all(&old);
        std::fs::File::open(parent)
            .and_then(|f| f.sync_all())
            .map_err(|e| dir_err(parent, e.to_string()))
    }

    pub fn load(dir: &Path) -> Result<Planner, PlannerError> {
        let manifest_path = dir.join(MANIFEST);
        let bytes =
            std::fs::read(&manifest_path).map_err(|e| dir_err(&manifest_path, e.to_string()))?;
        let weights_path = dir.join(WEIGHTS);
        let weights =
            std::fs::read(&weights_path).map_err(|e| dir_err(&weights_path, e.to_string()))?;
        Planner::from_bytes(&bytes, &weights, dir)
    }

    /// Load from the two files' contents (`origin` names them in errors).
    pub fn from_bytes(
        manifest: &[u8],
        weights: &[u8],
        origin: &Path,
    ) -> Result<Planner, PlannerError> {
        let m: Manifest = serde_json::from_slice(manifest)
            .map_err(|e| dir_err(&origin.join(MANIFEST), format!("invalid manifest: {e}")))?;
        if m.format_version != FORMAT_VERSION {
            return Err(dir_err(
                origin,
                format!(
                    "format version {} is not supported (expected {FORMAT_VERSION})",
                    m.format_version
                ),
            ));
        }
        if m.family != "tiny_gpt" {
            return Err(dir_err(
                origin,
                format!("model family `{}` is not supported here", m.family),
            ));
        }
        let device = Device::Cpu;
        let tensors: HashMap<String, candle_core::Tensor> =
            candle_core::safetensors::load_buffer(weights, &device)
                .map_err(|e| dir_err(&origin.join(WEIGHTS), format!("unreadable weights: {e}")))?;
        let model = TinyGpt::new(m.model, 0, &device)?;
        model.set_weights(&tensors, &origin.join(WEIGHTS))?;
        let catalog = Catalog::from_tools(m.catalog)?;
        Planner::new(model, m.codec, catalog, m.settings, m.meta)
    }
}

/// The default planner shipped inside the binary (see `planners/default/`), used when no
/// `--planner` is given.
pub fn default_planner() -> Result<Planner, PlannerError> {
    match embedded::PLANNER {
        Some((manifest, weights)) => {
            Planner::from_bytes(manifest, weights, Path::new("<embedded default planner>"))
        }
        None => Err(PlannerError::Dir {
            path: "<embedded default planner>".into(),
            message: "this build has no embedded planner; pass --planner DIR".into(),
        }),
    }
}

mod embedded {
    /// Re-trained by `scripts/train-default.sh`.
    pub const PLANNER: Option<(&[u8], &[u8])> = Some((
        include_bytes!("../default/planner.json"),
        include_bytes!("../default/model.safetensors"),
    ));
}
