mod common;

#[test]
fn smollm2_tokenizer_matches_llama_cpp_ids() {
    let b = common::bundle();
    let t = &b.tokenizer;
    // Verified against llama.cpp by scripts/llama_crosscheck.py.
    let prompt = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let expect: Vec<u32> = vec![
        1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
        407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1,
        520, 9531, 198,
    ];
    let ids = t.encode(prompt, true, true);
    assert_eq!(ids, expect);
    assert_eq!(t.decode(&ids, false).unwrap(), prompt);
    // Without special parsing, `<|im_start|>` is ordinary text.
    assert!(!t.encode("<|im_start|>", false, false).contains(&1));
    // Token bytes: byte-level decoding, specials as literal text.
    assert_eq!(t.token_bytes(198).unwrap(), b"\n");
    assert_eq!(t.token_bytes(1).unwrap(), b"<|im_start|>");
    assert_eq!(t.all_token_bytes().len(), 49152);
    assert_eq!(t.vocab_size(), 49152);
    assert!(t.stop_ids().contains(&2));
    assert!(t.token_bytes(49152).is_none());
    assert!(t.decode(&[49152], false).is_err());
    // Every byte-level token decodes to bytes that re-encode to something non-empty.
    let digits = t.encode("2024", false, true);
    assert_eq!(digits.len(), 4, "smollm splits digits individually");
}

/// SentencePiece-style `tokenizer.json` files (BPE with byte fallback: Gemma's, Llama 2's), as
/// transformers' converters write them for a tiny SentencePiece model, give Hugging Face
/// `tokenizers`' ids on every text of `scripts/spm_hf_golden.py` (spaces at the ends and in
/// runs, tabs and newlines, characters only byte fallback spells, special tokens) and decode
/// back to the text.
#[test]
fn spm_hf_tokenizer_json_matches_hugging_face_ids() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spm_hf");
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap()).unwrap();
    for (name, rows) in golden["cases"].as_object().unwrap() {
        let read =
            plansmith_llama::Tokenizer::from_hf_file(&dir.join(format!("{name}.tokenizer.json")))
                .unwrap();
        // Written back as tokenizer.json (an exported model's), it reads to the same ids.
        let written =
            plansmith_llama::Tokenizer::from_hf_json(&read.to_hf_json().unwrap()).unwrap();
        for (t, how) in [(&read, "read"), (&written, "written back")] {
            let mut byte_fallback = 0;
            for row in rows.as_array().unwrap() {
                let text = row["text"].as_str().unwrap();
                let want: Vec<u32> = row["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u32)
                    .collect();
                let got = t.encode(text, false, true);
                assert_eq!(got, want, "{name} ({how}): ids of {text:?}");
                byte_fallback += got
                    .iter()
                    .filter(|&&id| t.token_str(id).is_some_and(|s| s.starts_with("<0x")))
                    .count();
                // Llama's prepended `▁` decodes to a leading space, as its HF decoder strips (the
                // non-legacy one prepends it only where the text does not start with a space).
                let back = t.decode(&got, false).unwrap();
                let prepended = match name.as_str() {
                    "llama" => !text.is_empty(),
                    "llama_first" => !text.is_empty() && !text.starts_with(' '),
                    _ => false,
                };
                let back = if prepended {
                    back.strip_prefix(' ').unwrap_or(&back).to_string()
                } else {
                    back
                };
                assert_eq!(back, text, "{name}: decoding {want:?}");
            }
            assert!(
                byte_fallback > 10,
                "{name}: the corpus exercises byte fallback"
            );
        }
    }
}

/// A SentencePiece vocabulary scored the GGUF way (a score per piece, not a merge list) written
/// as tokenizer.json tokenizes the same: the merges rank pieces by score, so where two pairs
/// compete the better-scoring piece still wins.
#[test]
fn a_scored_sentencepiece_vocabulary_written_as_tokenizer_json_tokenizes_the_same() {
    use plansmith_llama::{TokenKind, Tokenizer};
    let mut tokens = vec!["<unk>".to_string(), "<s>".to_string()];
    let mut kinds = vec![TokenKind::Unknown, TokenKind::Control];
    let mut scores = vec![0.0f32, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        kinds.push(TokenKind::Byte);
        scores.push(0.0);
    }
    // "bc" outranks "ab", so "abc" is a + bc -> abc only if "abc" is reachable from there.
    for (piece, score) in [
        ("\u{2581}", -1.0),
        ("a", -2.0),
        ("b", -3.0),
        ("c", -4.0),
        ("d", -5.0),
        ("bc", -6.0),
        ("ab", -7.0),
        ("\u{2581}a", -8.0),
        ("abc", -9.0),
        ("cd", -10.0),
        ("\u{2581}ab", -11.0),
        ("\u{2581}abcd", -12.0),
        ("da", -13.0),
    ] {
        tokens.push(piece.to_string());
        kinds.push(TokenKind::Normal);
        scores.push(score);
    }
    for prefix in [false, true] {
        let scored =
            Tokenizer::sentencepiece(tokens.clone(), kinds.clone(), scores.clone(), prefix)
                .unwrap();
        let written = Tokenizer::from_hf_json(&scored.to_hf_json().unwrap()).unwrap();
        for text in [
            "abc",
            " abcd",
            "abcd abc bcd",
            "xyz \u{e9}t\u{e9}",
            "a b c d",
            "aabbccdd",
            "cab dab",
            "<s>abc<s> ab",
            "",
        ] {
            let want = scored.encode(text, false, true);
            assert_eq!(
                written.encode(text, false, true),
                want,
                "{text:?} (space prefix {prefix})"
            );
            assert_eq!(
                written.decode(&want, false).unwrap(),
                scored.decode(&want, false).unwrap()
            );
        }
    }
}

/// What a SentencePiece-style `tokenizer.json` may not hold is refused, naming it.
#[test]
fn spm_hf_tokenizer_json_refuses_what_it_does_not_compute() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spm_hf");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("gemma.tokenizer.json")).unwrap())
            .unwrap();
    let refuse = |edit: &dyn Fn(&mut serde_json::Value), what: &str| {
        let mut v = base.clone();
        edit(&mut v);
        let err = plansmith_llama::Tokenizer::from_hf_json(&v)
            .err()
            .unwrap_or_else(|| panic!("accepted: {what}"));
        assert!(err.to_string().contains(what), "{what}: {err}");
    };
    refuse(
        &|v| v["normalizer"] = serde_json::json!({"type": "NFKC"}),
        "normalizer",
    );
    refuse(
        &|v| v["pre_tokenizer"] = serde_json::json!({"type": "Metaspace", "replacement": "▁"}),
        "Metaspace",
    );
    refuse(
        &|v| v["model"]["merges"][0] = serde_json::json!(["zq", "xj"]),
        "merges[0]",
    );
}
