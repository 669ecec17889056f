//! One-call loading of everything a GGUF file carries.

use std::path::Path;
use std::sync::Arc;

use crate::chat::ChatTemplate;
use crate::error::Result;
use crate::gguf::GgufFile;
use crate::model::LlamaModel;
use crate::tokenizer::Tokenizer;

/// Model, tokenizer and chat template loaded from one GGUF file.
#[derive(Debug, Clone)]
pub struct GgufBundle {
    pub model: Arc<LlamaModel>,
    pub tokenizer: Arc<Tokenizer>,
    pub template: ChatTemplate,
}

impl GgufBundle {
    /// Load a Llama-family GGUF (weights, BPE tokenizer, chat template; ChatML when the file
    /// has no template).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let mut g = GgufFile::open(path)?;
        let tokenizer = Tokenizer::from_gguf(&g)?;
        let template = if g.metadata().contains_key("tokenizer.chat_template") {
            ChatTemplate::from_gguf(&g, &tokenizer)?
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
