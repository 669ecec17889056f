//! A planner directory is input too. Found by plansmith-fuzz: a planner.json claiming an
//! enormous model made the loader allocate it (the process was killed for memory) before the
//! weights were compared. Now the manifest's model must fit in the weights file.

use std::path::Path;

use plansmith_planner::Planner;
use serde_json::Value;

const MANIFEST: &[u8] = include_bytes!("../default/planner.json");
const WEIGHTS: &[u8] = include_bytes!("../default/model.safetensors");

fn load_with(edit: impl FnOnce(&mut Value)) -> String {
    let mut m: Value = serde_json::from_slice(MANIFEST).unwrap();
    edit(&mut m);
    let bytes = serde_json::to_vec(&m).unwrap();
    match Planner::from_bytes(&bytes, WEIGHTS, Path::new("planner-under-test")) {
        Ok(_) => panic!("a hostile manifest loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_manifest_larger_than_its_weights_is_refused_before_allocating() {
    // The unmodified embedded planner loads.
    Planner::from_bytes(MANIFEST, WEIGHTS, Path::new("planner-under-test")).unwrap();
    let e = load_with(|m| m["model"]["n_layer"] = Value::from(1u64 << 40));
    assert!(e.contains("n_layer") && e.contains("planner.json"), "{e}");
    let e = load_with(|m| m["model"]["d_model"] = Value::from(4096));
    assert!(e.contains("parameters") && e.contains("bytes"), "{e}");
    let e = load_with(|m| m["model"]["block"] = Value::from(u64::MAX));
    assert!(e.contains("block"), "{e}");
}
