//! One-call loading of a model, its tokenizer and its chat template, from a GGUF file or a
//! Hugging Face checkpoint directory.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::chat::ChatTemplate;
use crate::error::{LlamaError, Result};
use crate::gguf::GgufFile;
use crate::hf::{
    hf_export_tensors, is_hf_dir, load_hf_model, read_json, write_atomic, write_safetensors,
};
use crate::model::LlamaModel;
use crate::tokenizer::Tokenizer;

/// Model, tokenizer and chat template loaded together.
#[derive(Debug, Clone)]
pub struct ModelBundle {
    pub model: Arc<LlamaModel>,
    pub tokenizer: Arc<Tokenizer>,
    pub template: ChatTemplate,
}

/// The former name of [`ModelBundle`] (GGUF-only at the time).
pub type GgufBundle = ModelBundle;

/// A token given in `tokenizer_config.json` as `"text"` or `{"content": "text", ...}`.
fn token_text(v: Option<&Value>) -> Option<&str> {
    match v? {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("content").and_then(Value::as_str),
        _ => None,
    }
}

impl ModelBundle {
    /// Load a Llama-family `.gguf` file (weights, tokenizer, chat template; when the file has
    /// none, Gemma's turn format for Gemma and ChatML for the rest) or a Hugging Face directory (see [`ModelBundle::load_hf`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if path.is_dir() {
            return Self::load_hf(path);
        }
        let mut g = GgufFile::open(path)?;
        let tokenizer = Tokenizer::from_gguf(&g)?;
        let template = if g.metadata().contains_key("tokenizer.chat_template") {
            ChatTemplate::from_gguf(&g, &tokenizer)?
        } else if g.architecture()? == crate::GgufArch::Gemma3 {
            ChatTemplate::gemma()
        } else {
            ChatTemplate::chatml()
        };
        let model = LlamaModel::from_gguf(&mut g)?;
        Ok(Self {
            model: Arc::new(model),
            tokenizer: Arc::new(tokenizer),
            template,
        })
    }

    /// Load a Hugging Face directory: `config.json`, `model.safetensors` or
    /// `model.safetensors.index.json` + shards, `tokenizer.json`, and optionally
    /// `tokenizer_config.json` (`chat_template`, `bos_token`, `eos_token`, `add_bos_token`) or
    /// `chat_template.jinja`. Without a template, Gemma's turn format is used for Gemma and
    /// ChatML for the rest.
    pub fn load_hf(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if !is_hf_dir(dir) {
            return Err(LlamaError::Io {
                path: dir.join("config.json"),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a Hugging Face checkpoint directory (no config.json)",
                ),
            });
        }
        let tok_path = dir.join("tokenizer.json");
        let mut tok = Tokenizer::from_hf_file(&tok_path)?;
        let tc_path = dir.join("tokenizer_config.json");
        let tc = if tc_path.is_file() {
            read_json(&tc_path)?
        } else {
            Value::Null
        };
        let (model, hc) = load_hf_model(dir)?;
        let resolve = |key: &str, tok: &Tokenizer| -> Result<Option<u32>> {
            match token_text(tc.get(key)) {
                None => Ok(None),
                Some(t) => tok.lookup(t).map(Some).ok_or_else(|| {
                    LlamaError::Tokenizer(format!(
                        "{}: `{key}` {t:?} is not in {}",
                        tc_path.display(),
                        tok_path.display()
                    ))
                }),
            }
        };
        if let Some(b) = resolve("bos_token", &tok)? {
            tok.bos = Some(b);
        } else if tok.bos.is_none() {
            tok.bos = hc.bos_token_id;
        }
        if let Some(e) = resolve("eos_token", &tok)? {
            tok.eos = Some(e);
        } else {
            tok.eos = hc.eos_token_ids.first().copied();
        }
        if let Some(a) = tc.get("add_bos_token").and_then(Value::as_bool) {
            tok.add_bos = a;
        }
        let vocab = model.config().vocab_size;
        for (what, id) in [("bos", tok.bos), ("eos", tok.eos)] {
            if let Some(id) = id.filter(|&i| i as usize >= tok.vocab_size().max(vocab)) {
                return Err(LlamaError::Tokenizer(format!(
                    "{what} token id {id} is outside the vocabulary"
                )));
            }
        }
        if tok.vocab_size() > vocab {
            return Err(LlamaError::Tokenizer(format!(
                "{} has {} tokens but the model's vocab_size is {vocab}",
                tok_path.display(),
                tok.vocab_size()
            )));
        }
        let template_src = match tc.get("chat_template") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(list)) => list
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .or_else(|| list.first())
                .and_then(|t| t.get("template"))
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        };
        // Newer `transformers` versions save the template next to the tokenizer files.
        let jinja = dir.join("chat_template.jinja");
        let template_src =
            match template_src {
                Some(s) => Some(s),
                None if jinja.is_file() => Some(std::fs::read_to_string(&jinja).map_err(
                    |source| LlamaError::Io {
                        path: jinja.clone(),
                        source,
                    },
                )?),
                None => None,
            };
        let template = match template_src {
            Some(src) => {
                let text = |id: Option<u32>| {
                    id.and_then(|i| tok.token_bytes(i))
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .unwrap_or_default()
                };
                ChatTemplate::new(src, &text(tok.bos), &text(tok.eos))?
            }
            None if hc.arch == crate::HfArch::Gemma3 => ChatTemplate::gemma(),
            None => ChatTemplate::chatml(),
        };
        Ok(Self {
            model: Arc::new(model),
            tokenizer: Arc::new(tok),
            template,
        })
    }

    /// Write this bundle as a Hugging Face directory that [`ModelBundle::load`] (and
    /// `transformers`) can read: `config.json`, `model.safetensors` (dense f32; quantized
    /// weights are dequantized; q/k rows in the rotate-half layout), `tokenizer.json`,
    /// `tokenizer_config.json` (chat template, BOS / EOS). Each file is written to a temporary
    /// name, fsynced and renamed.
    pub fn save_hf(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| LlamaError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let tok = &self.tokenizer;
        let (config, tensors) = hf_export_tensors(&self.model, tok.bos, tok.eos)?;
        write_safetensors(dir, &tensors)?;
        drop(tensors);
        let pretty = |v: &Value| serde_json::to_vec_pretty(v).unwrap_or_default();
        write_atomic(dir, "config.json", &pretty(&config))?;
        write_atomic(dir, "tokenizer.json", &pretty(&tok.to_hf_json()?))?;
        let text = |id: Option<u32>| {
            id.and_then(|i| tok.token_bytes(i))
                .map(|b| Value::String(String::from_utf8_lossy(b).into_owned()))
                .unwrap_or(Value::Null)
        };
        let tc = serde_json::json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": self.template.source(),
            "bos_token": text(tok.bos),
            "eos_token": text(tok.eos),
            "add_bos_token": tok.add_bos,
            "clean_up_tokenization_spaces": false,
        });
        write_atomic(dir, "tokenizer_config.json", &pretty(&tc))?;
        Ok(())
    }

    /// Tokens that end a reply.
    pub fn stop_ids(&self) -> Vec<u32> {
        self.tokenizer.stop_ids()
    }
}

/// Greedy generation helper: feeds `logits`, appends argmax tokens until a stop id or
/// `max_new` tokens. Returns the generated ids (stop token excluded).
pub fn greedy_generate(
    session: &mut crate::Session,
    mut logits: Vec<f32>,
    stop: &[u32],
    max_new: usize,
) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for _ in 0..max_new {
        let t = crate::argmax(&logits);
        if stop.contains(&t) {
            break;
        }
        out.push(t);
        logits = session.step(t)?;
    }
    Ok(out)
}
