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
