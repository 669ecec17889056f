//! Greedy chat with a GGUF model: `llama_chat <gguf> "<user message>" [max_new]`.

use plansmith_llama::{greedy_generate, ChatMessage, GgufBundle};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: llama_chat <gguf> <message> [max_new]");
        std::process::exit(2);
    }
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        let b = GgufBundle::load(&args[1])?;
        let prompt =
            b.template
                .render(&[ChatMessage::new("user", args[2].as_str())], None, true)?;
        let ids = b.tokenizer.encode(&prompt, true, true);
        let mut s = b.model.session();
        let t0 = std::time::Instant::now();
        let logits = s.prefill(&ids)?;
        let max_new = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(64);
        let out = greedy_generate(&mut s, logits, &b.stop_ids(), max_new)?;
        println!("{}", b.tokenizer.decode(&out, true)?);
        eprintln!(
            "{} prompt + {} new tokens in {:.2?}",
            ids.len(),
            out.len(),
            t0.elapsed()
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
