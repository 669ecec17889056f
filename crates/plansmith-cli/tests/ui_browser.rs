//! The playground page in a real browser: `plansmith serve` (the embedded default planner) on
//! a free loopback port, driven through headless Chromium by WebDriver (Debian's `chromium`
//! and `chromium-driver`; `.ci/run` installs them). The assertions are on what a user sees:
//! the tool card of a planned request, "escalated" with its reason below the floor, a pasted
//! broken catalog's error path, the API key asked for and then used, the teacher's harvested
//! answer, a cascade's hops, and no sideways scrolling at 360 px. Screenshots of each state are written under the target directory
//! (`ui-screenshots/`).
//!
//! Fails loudly when the browser or the driver is missing: set `PLANSMITH_CHROMIUM` /
//! `PLANSMITH_CHROMEDRIVER` to use others than /usr/bin/chromium and /usr/bin/chromedriver.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use support::Process;

fn tool(var: &str, default: &str, package: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var(var).unwrap_or_else(|_| default.to_string()));
    assert!(
        path.exists(),
        "the browser test needs {} (Debian package `{package}`: apt-get install chromium \
         chromium-driver; .ci/run installs it), or {var} pointing at one",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// `plansmith serve` with extra flags; returns the running server and its base URL.
fn serve(args: &[&str]) -> (support::Served, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plansmith"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--workers", "1"])
        .args(args)
        .env_remove("PLANSMITH_API_KEY")
        .stderr(Stdio::inherit());
    let served = support::serve(cmd);
    let url = served.url.clone();
    (served, url)
}

/// Just enough of the W3C WebDriver protocol (plain HTTP + JSON) to drive one page.
struct Browser {
    http: ureq::Agent,
    base: String,
    _driver: Process,
    shots: PathBuf,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    fn start(shots: &Path) -> Browser {
        let chromium = tool("PLANSMITH_CHROMIUM", "/usr/bin/chromium", "chromium");
        let driver = tool(
            "PLANSMITH_CHROMEDRIVER",
            "/usr/bin/chromedriver",
            "chromium-driver",
        );
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let process = Process(child);
        let http: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let root = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = http
                .get(format!("{root}/status"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_str().unwrap(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--no-proxy-server"],
            }
        }}});
        let v = send(&http, "POST", &format!("{root}/session"), Some(caps));
        let session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {v}"))
            .to_string();
        std::fs::create_dir_all(shots).unwrap();
        Browser {
            http,
            base: format!("{root}/session/{session}"),
            _driver: process,
            shots: shots.to_path_buf(),
        }
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        send(&self.http, method, &format!("{}{path}", self.base), body)
    }

    fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    fn find(&self, css: &str) -> String {
        let v = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element `{css}` on the page: {v}"))
            .to_string()
    }

    /// Type into an element, as a user would (`\u{E007}` is the Enter key).
    fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        );
    }

    fn clear(&self, css: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/clear"), Some(json!({})));
    }

    fn click(&self, css: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    fn script(&self, js: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": []})),
        )
    }

    /// The visible text of the first element matching `css` ("" when there is none or it is
    /// hidden).
    fn text(&self, css: &str) -> String {
        let js = format!(
            "const e = document.querySelector({}); return e && e.offsetParent !== null ? e.innerText : '';",
            Value::from(css)
        );
        self.script(&js).as_str().unwrap_or_default().to_string()
    }

    /// Wait until the text of `css` satisfies `ok`; the text it settled on.
    fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let t = self.text(css);
            if ok(&t) {
                return t;
            }
            if Instant::now() > deadline {
                self.screenshot("failure");
                panic!("waited 30 s for {what} in `{css}`; it shows {t:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn screenshot(&self, name: &str) {
        let v = self.cmd("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("a base64 screenshot"))
            .expect("valid base64");
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// Lay the page out as a phone would (360 CSS pixels wide).
    fn phone(&self) {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            Some(
                json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": {
                "width": 360, "height": 780, "deviceScaleFactor": 1, "mobile": true}}),
            ),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.base).call();
    }
}

fn send(http: &ureq::Agent, method: &str, url: &str, body: Option<Value>) -> Value {
    let resp = match (method, body) {
        ("GET", _) => http.get(url).call(),
        ("DELETE", _) => http.delete(url).call(),
        (_, Some(b)) => http.post(url).send_json(&b),
        (_, None) => http.post(url).send_empty(),
    };
    let mut resp = resp.unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}"));
    let status = resp.status().as_u16();
    let v: Value = resp.body_mut().read_json().unwrap_or(Value::Null);
    assert!(
        status < 300,
        "WebDriver {method} {url} answered {status}: {v}"
    );
    v["value"].clone()
}

const ENTER: &str = "\u{E007}";

#[test]
fn playground_shows_plans_escalations_catalog_errors_and_asks_for_the_key() {
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    let browser = Browser::start(&shots);

    // 1. A request typed and planned (Enter) shows a tool card, the copied value highlighted in
    //    the request, and the outcome.
    let (_server, url) = serve(&[]);
    browser.goto(&format!("{url}/ui"));
    // The active catalog is shown: the embedded planner's Pace tools.
    browser.wait_text("#catalog-label", "the server's catalog", |t| {
        t.contains("server")
    });
    let catalog = browser.script("return document.getElementById('catalog').value;");
    assert!(
        catalog.as_str().unwrap_or_default().contains("\"open\""),
        "the catalog panel does not show the server's catalog: {catalog}"
    );
    browser.type_into("#request", &format!("please open safari{ENTER}"));
    let outcome = browser.wait_text("#result .outcome", "the outcome", |t| {
        t.contains("accepted")
    });
    assert!(outcome.contains(" ms"), "no latency shown: {outcome:?}");
    assert_eq!(browser.text("#result .call .tool"), "open");
    let args = browser.text("#result .call .args");
    assert!(args.contains("safari"), "{args:?}");
    assert!(args.contains("from the request"), "{args:?}");
    assert_eq!(browser.text("#result mark.copied").to_lowercase(), "safari");
    let conf = browser.text("#result .confidence");
    assert!(
        conf.contains("confidence") && conf.contains("floor"),
        "{conf:?}"
    );
    browser.screenshot("planned");

    // 2. A broken catalog pasted shows the error with its JSON path, next to the catalog.
    browser.clear("#catalog");
    browser.type_into(
        "#catalog",
        r#"[{"type": "function", "function": {"name": "find_file", "parameters": {"type": "object", "properties": {"q": {"type": "strin"}}}}}]"#,
    );
    browser.click("#catalog-use");
    let err = browser.wait_text("#catalog-error", "the catalog error", |t| !t.is_empty());
    assert!(
        err.contains("tools[0].function.parameters.properties.q.type"),
        "{err:?}"
    );
    assert!(err.contains("strin"), "{err:?}");
    assert!(browser.text("#result").contains("HTTP 400"));
    browser.screenshot("catalog-error");

    // A good catalog of the user's own is planned against.
    browser.clear("#catalog");
    browser.type_into(
        "#catalog",
        r#"[{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]"#,
    );
    browser.clear("#request");
    browser.type_into("#request", "what is the weather in Paris");
    browser.click("#catalog-use");
    browser.wait_text("#result .outcome", "a plan on the pasted catalog", |t| {
        t.contains("accepted") || t.contains("escalated")
    });
    assert!(browser.text("#catalog-error").is_empty());
    assert!(browser.text("#catalog-label").contains("yours"));

    // Recent requests, and the traces a user can download (answered ones only).
    let recent = browser.text("#recent");
    assert!(recent.contains("please open safari"), "{recent:?}");
    let traces = browser.script("return window.plansmithTraces();");
    let first: Value = serde_json::from_str(
        traces
            .as_str()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("the traces are not JSONL ({e}): {traces}"));
    assert_eq!(first["request"], "please open safari");
    assert_eq!(first["calls"][0]["name"], "open");
    // The download button saves the same lines as a file.
    let downloads = std::env::temp_dir().join(format!("plansmith-ui-dl-{}", std::process::id()));
    std::fs::create_dir_all(&downloads).unwrap();
    browser.cmd(
        "POST",
        "/goog/cdp/execute",
        Some(json!({"cmd": "Browser.setDownloadBehavior", "params": {
            "behavior": "allow", "downloadPath": downloads.to_str().unwrap()}})),
    );
    browser.click("#download");
    let saved = downloads.join("plansmith-playground.jsonl");
    // Chromium may create the file before it has written it: wait for the whole content.
    let deadline = Instant::now() + Duration::from_secs(20);
    let file = loop {
        let file = std::fs::read_to_string(&saved).unwrap_or_default();
        if file.trim_end() == traces.as_str().unwrap() || Instant::now() > deadline {
            break file;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(file.trim_end(), traces.as_str().unwrap(), "the download");
    // ... and `plansmith train` reads them.
    let read = plansmith_core::trace::read_traces(&saved).expect("the download is training data");
    assert_eq!(read[0].calls[0].name, "open");
    let _ = std::fs::remove_dir_all(&downloads);

    // 3. Readable at 360 px: nothing wider than the screen.
    browser.phone();
    browser.goto(&format!("{url}/ui"));
    browser.type_into("#request", &format!("open safari{ENTER}"));
    browser.wait_text("#result .outcome", "the outcome at 360 px", |t| {
        t.contains("accepted")
    });
    let overflow = browser.script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
    );
    assert_eq!(overflow, json!(0), "the page scrolls sideways at 360 px");
    browser.screenshot("phone");
    browser.cmd(
        "POST",
        "/goog/cdp/execute",
        Some(json!({"cmd": "Emulation.clearDeviceMetricsOverride", "params": {}})),
    );

    // 4. With an API key the page asks for it; below the floor the plan shows "escalated" with
    //    the reason. (`--floor 0`: no plan is that sure.)
    let (_strict, url) = serve(&["--floor", "0", "--api-key", "ui-secret"]);
    browser.goto(&format!("{url}/ui"));
    browser.wait_text("#key-panel", "the API key prompt", |t| {
        t.contains("API key")
    });
    browser.type_into("#request", &format!("open safari{ENTER}"));
    let refused = browser.wait_text("#result", "the refusal", |t| t.contains("401"));
    assert!(refused.contains("API key"), "{refused:?}");
    browser.type_into("#key", &format!("ui-secret{ENTER}"));
    browser.wait_text("#key-panel", "the prompt to go away", str::is_empty);
    browser.click("#plan");
    let outcome = browser.wait_text("#result .outcome", "the escalation", |t| {
        t.contains("escalated")
    });
    assert!(outcome.contains("below floor"), "{outcome:?}");
    assert!(browser.text("#result .call").is_empty());
    browser.screenshot("escalated");

    // 5. Below the floor with a teacher: the teacher's answer, marked as harvested, and the
    //    harvest file holds it.
    let dir = std::env::temp_dir().join(format!("plansmith-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let answers = dir.join("teacher.jsonl");
    let harvest = dir.join("harvest.jsonl");
    std::fs::write(
        &answers,
        r#"{"request": "open safari", "calls": [{"name": "open", "arguments": {"target": {"type": "app", "label": "safari"}}}]}"#,
    )
    .unwrap();
    let teacher = format!("traces:{}", answers.display());
    let (_taught, url) = serve(&[
        "--floor",
        "0",
        "--teacher",
        &teacher,
        "--harvest",
        harvest.to_str().unwrap(),
    ]);
    browser.goto(&format!("{url}/ui"));
    browser.type_into("#request", &format!("open safari{ENTER}"));
    let outcome = browser.wait_text("#result .outcome", "the teacher's answer", |t| {
        t.contains("teacher")
    });
    assert!(outcome.contains("harvested"), "{outcome:?}");
    assert_eq!(browser.text("#result .call .tool"), "open");
    let harvested = std::fs::read_to_string(&harvest).unwrap_or_default();
    assert!(harvested.contains("\"safari\""), "{harvested:?}");
    browser.screenshot("teacher");

    // 6. A cascade: the first hop passes the request on, the second answers; the page says
    //    which hop answered and shows every hop's confidence and floor.
    let cascade = dir.join("cascade.json");
    std::fs::write(
        &cascade,
        r#"{"hops": [{"name": "strict", "embedded": true, "floor": 0},
                     {"name": "lenient", "embedded": true, "floor": -1e30}]}"#,
    )
    .unwrap();
    let (_cascade, url) = serve(&["--cascade", cascade.to_str().unwrap()]);
    browser.goto(&format!("{url}/ui"));
    browser.type_into("#request", &format!("open safari{ENTER}"));
    let hops = browser.wait_text("#result table.hops", "the hops table", |t| {
        t.contains("lenient")
    });
    assert!(hops.contains("answered by lenient"), "{hops:?}");
    assert!(
        hops.contains("strict") && hops.contains("passed on"),
        "{hops:?}"
    );
    assert_eq!(browser.text("#result .call .tool"), "open");
    browser.screenshot("cascade");
    let _ = std::fs::remove_dir_all(&dir);
    println!("screenshots in {}", shots.display());
}
