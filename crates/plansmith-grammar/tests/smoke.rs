use plansmith_core::{Catalog, Syntax};
use plansmith_grammar::*;

fn char_env() -> TokEnv {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    toks.push(b"\n".to_vec());
    toks.push(b"<eos>".to_vec());
    let eos = toks.len() as u32 - 1;
    TokEnv::from_token_bytes(toks, eos, &[], Some(128)).unwrap()
}

fn pace() -> Catalog {
    Catalog::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/pace/tools.json")).unwrap()
}

fn force(c: &mut Constraint, env: &TokEnv, text: &str) -> Result<(), Dead> {
    for t in env.tokenize(text) {
        c.mask()?;
        c.commit(t)?;
    }
    Ok(())
}

#[test]
fn smoke() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    for syntax in Syntax::ALL {
        let opts = Options::new(syntax);
        let req = Request { text: "open Safari and click Save draft please 4242".into(), entities: vec![] };
        let g = grammar_text(&pace(), &opts, &req).unwrap();
        if syntax == Syntax::Dsl { println!("{g}"); }
        let c = engine.constraint(&pace(), &opts, &req);
        match c {
            Ok(_) => {}
            Err(e) => panic!("{syntax}: {e}\n{g}"),
        }
    }
    let opts = Options::new(Syntax::Dsl);
    let req = Request::new("open Safari and click Save draft please 4242");
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    force(&mut c, &env, "open(target.type=app; target.label=Safari)\n").unwrap();
    assert!(c.is_accepting(), "{:?}", c.state());
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert!(force(&mut c, &env, "open(target.type=app; target.label=Safary)\n").is_err());
}
