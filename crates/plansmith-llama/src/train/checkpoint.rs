//! Resumable training checkpoints: one safetensors file holding the adapter weights and both
//! AdamW moments (f32), with the step, the engine configuration, the base model's fingerprint
//! and the caller's own state (the data order, the loss history) in its metadata. Written
//! atomically (temp file, fsync, rename, fsync of the directory), so an interrupted write leaves
//! the previous checkpoint intact.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::{EngineConfig, LoraEngine};
use crate::error::{LlamaError, Result};

const FORMAT: &str = "plansmith-lora-checkpoint/1";

fn bad(path: &Path, reason: impl Into<String>) -> LlamaError {
    LlamaError::Checkpoint {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl LoraEngine {
    /// Write the full training state to `path`; `extra` is stored verbatim and returned by
    /// [`Self::resume`].
    pub fn save_checkpoint(&self, path: &Path, extra: &serde_json::Value) -> Result<()> {
        let mut meta = HashMap::new();
        meta.insert("format".to_string(), FORMAT.to_string());
        meta.insert("step".to_string(), self.step.to_string());
        meta.insert("fingerprint".to_string(), self.fingerprint.to_string());
        meta.insert(
            "config".to_string(),
            serde_json::to_string(&self.config).map_err(|e| bad(path, e.to_string()))?,
        );
        meta.insert("extra".to_string(), extra.to_string());
        let n = self.lora.data.len();
        let (p, m, v) = (
            bytes(&self.lora.data),
            bytes(&self.opt.m),
            bytes(&self.opt.v),
        );
        let tensors = [("adam_m", &m), ("adam_v", &v), ("params", &p)]
            .into_iter()
            .map(|(name, b)| {
                Ok((
                    name,
                    safetensors::tensor::TensorView::new(Dtype::F32, vec![n], b)
                        .map_err(|e| bad(path, e.to_string()))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let out =
            safetensors::serialize(tensors, Some(meta)).map_err(|e| bad(path, e.to_string()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| LlamaError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        plansmith_core::trace::write_atomic(path, &out).map_err(|source| LlamaError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Load the state saved by [`Self::save_checkpoint`] into an engine built on the same base
    /// model with the same configuration; returns the caller's `extra`.
    ///
    /// Errors (`Checkpoint`, naming the file): not a checkpoint, truncated or corrupt, another
    /// base model, another configuration.
    pub fn resume(&mut self, path: &Path) -> Result<serde_json::Value> {
        let buf = std::fs::read(path).map_err(|source| LlamaError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let st = SafeTensors::deserialize(&buf)
            .map_err(|e| bad(path, format!("not a readable safetensors file: {e}")))?;
        let (_, header) = SafeTensors::read_metadata(&buf).map_err(|e| bad(path, e.to_string()))?;
        let meta = header.metadata().clone().unwrap_or_default();
        let get = |k: &str| {
            meta.get(k)
                .ok_or_else(|| bad(path, format!("metadata has no `{k}`")))
        };
        if get("format")? != FORMAT {
            return Err(bad(
                path,
                format!("format `{}` is not {FORMAT}", get("format")?),
            ));
        }
        if get("fingerprint")? != &self.fingerprint.to_string() {
            return Err(bad(path, "it was written for another base model"));
        }
        let config: EngineConfig =
            serde_json::from_str(get("config")?).map_err(|e| bad(path, format!("config: {e}")))?;
        // The activation budget decides whether the backward recomputes a block (the same
        // numbers) and how a batch without a shared prefix is cut into passes: a run may resume
        // with another budget (a machine with more or less memory), bit for bit while its
        // batches run in the same passes.
        let same = EngineConfig {
            keep_activations_bytes: self.config.keep_activations_bytes,
            ..config.clone()
        };
        if same != self.config {
            return Err(bad(path, format!(
                "it was written with another training configuration ({}); resume with the same options",
                serde_json::to_string(&config).unwrap_or_default()
            )));
        }
        let step: u64 = get("step")?
            .parse()
            .map_err(|_| bad(path, "`step` is not a number"))?;
        let extra: serde_json::Value =
            serde_json::from_str(get("extra")?).map_err(|e| bad(path, format!("extra: {e}")))?;
        let n = self.lora.data.len();
        let read = |name: &str| -> Result<Vec<f32>> {
            let t = st
                .tensor(name)
                .map_err(|e| bad(path, format!("tensor `{name}`: {e}")))?;
            if t.dtype() != Dtype::F32 || t.shape() != [n] {
                return Err(bad(
                    path,
                    format!(
                        "tensor `{name}` is {:?} {:?}, expected F32 [{n}]",
                        t.dtype(),
                        t.shape()
                    ),
                ));
            }
            Ok(t.data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        let (p, m, v) = (read("params")?, read("adam_m")?, read("adam_v")?);
        if p.iter().chain(&m).chain(&v).any(|x| !x.is_finite()) {
            return Err(bad(path, "it holds non-finite values"));
        }
        self.lora.data = p;
        self.opt.m = m;
        self.opt.v = v;
        self.step = step;
        Ok(extra)
    }
}
