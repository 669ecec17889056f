//! The `<tool_call>` surface's prose answer ("no call") is open only where the model itself
//! starts in prose. A scripted model (a byte vocabulary plus `<tool_call>` and an end token,
//! whose logits favour the next byte of the text it "wants" to write) shows both sides: one that
//! declines in words gets its prose as a plan with no call; one about to open a Markdown code
//! fence (as Qwen2.5-Coder-0.5B often is) is steered into a tagged call, not into prose.

use std::path::Path;

use plansmith_core::{Catalog, Syntax};
use plansmith_grammar::TokEnv;
use plansmith_planner::backend::{DecodeState, ModelBackend, Persisted, Started};
use plansmith_planner::prompt::CatalogText;
use plansmith_planner::{PlanRequest, Planner, PlannerError, PlannerMeta, PlannerSettings};

/// Ids: 0..256 the bytes, 256 `<tool_call>\n`, 257 the end token.
const TAG: u32 = 256;
const END: u32 = 257;
const VOCAB: usize = 258;

struct Scripted {
    /// What the model wants to write after the prompt.
    wish: Vec<u8>,
}

struct State<'a> {
    wish: &'a [u8],
    pos: usize,
}

impl State<'_> {
    /// The model's next-token logits: the next byte of its wish (then the end) scores 10; at the
    /// start a prose opening (`H`, as in "Here is…") 7 and the `<tool_call>` tag 5, so a model
    /// barred from its wish would rather talk than call; everything else 0.
    fn logits(&self) -> Vec<f32> {
        let mut l = vec![0f32; VOCAB];
        match self.wish.get(self.pos) {
            Some(&b) => l[b as usize] = 10.0,
            None => l[END as usize] = 10.0,
        }
        if self.pos == 0 {
            l[b'H' as usize] = l[b'H' as usize].max(7.0);
            l[TAG as usize] = 5.0;
        }
        l
    }
}

impl DecodeState for State<'_> {
    fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError> {
        Ok(ids.iter().map(|&id| self.step(id).unwrap()).collect())
    }

    fn step(&mut self, id: u32) -> Result<Vec<f32>, PlannerError> {
        // Off its script the model keeps no opinion but the end.
        let on_script = self.wish.get(self.pos) == Some(&(id as u8)) && id < 256;
        self.pos = if on_script {
            self.pos + 1
        } else {
            usize::MAX / 2
        };
        Ok(self.logits())
    }

    fn room(&self) -> usize {
        4096
    }
}

impl ModelBackend for Scripted {
    fn tok_env(&self) -> Result<TokEnv, PlannerError> {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"<tool_call>\n".to_vec());
        tokens.push(Vec::new());
        Ok(TokEnv::from_token_bytes(tokens, END, &[], None).unwrap())
    }
    fn grammar_eos(&self) -> u32 {
        END
    }
    fn can_spell(&self, _: &str) -> bool {
        true
    }
    fn max_new_tokens(&self) -> usize {
        600
    }
    fn fast_forward(&self) -> bool {
        true
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.len()
    }
    fn start(
        &self,
        _: &Catalog,
        _: &str,
        _: &str,
        _: CatalogText,
    ) -> Result<Started<'_>, PlannerError> {
        let state = State {
            wish: &self.wish,
            pos: 0,
        };
        let logits = state.logits();
        Ok(Started::Ready {
            state: Box::new(state),
            logits,
            prefix_hit: None,
            prompt_tokens: 0,
        })
    }
    fn check_catalog(&self, _: &Catalog, _: &str, _: CatalogText) -> Result<(), PlannerError> {
        Ok(())
    }
    fn free_stop(&self, id: u32) -> bool {
        id == END
    }
    fn detokenize(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().filter(|&&i| i < 256).map(|&i| i as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    fn tokenize_completion(&self, text: &str) -> Vec<u32> {
        text.bytes().map(u32::from).chain([END]).collect()
    }
    fn persisted(&self) -> Persisted<'_> {
        Persisted::Pretrained {
            base: Path::new("scripted"),
            adapter: None,
        }
    }
}

fn planner(wish: &str) -> Planner {
    let catalog = Catalog::from_json_str(
        r#"[{"name":"open","description":"Open an app","parameters":{"type":"object",
            "properties":{"app":{"type":"string"}},"required":["app"]}}]"#,
    )
    .unwrap();
    let mut settings = PlannerSettings::chat();
    settings.syntax = Syntax::ToolCall;
    let lm = Scripted {
        wish: wish.as_bytes().to_vec(),
    };
    Planner::with_lm(Box::new(lm), catalog, settings, PlannerMeta::default()).unwrap()
}

#[test]
fn a_model_that_declines_in_words_answers_no_call() {
    let p = planner("I'm sorry, I cannot check the weather.");
    let d = p.decode(&PlanRequest::new("what's the weather?")).unwrap();
    assert_eq!(d.text, "I'm sorry, I cannot check the weather.");
    let plan = d.plan.expect("prose parses");
    assert!(plan.calls.is_empty());
    assert_eq!(
        plan.spoken_text.as_deref(),
        Some("I'm sorry, I cannot check the weather.")
    );
}

#[test]
fn a_model_about_to_open_a_code_fence_is_steered_into_a_call() {
    let p = planner("```json\n{\"name\": \"open\", \"arguments\": {\"app\": \"Safari\"}}\n```");
    let d = p.decode(&PlanRequest::new("open safari")).unwrap();
    assert!(d.text.starts_with("<tool_call>\n"), "{:?}", d.text);
    assert_eq!(d.plan.expect("a tagged call parses").calls[0].name, "open");
}
