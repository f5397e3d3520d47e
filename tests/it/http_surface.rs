//! The HTTP surface of the foundation: /healthz, the server-rendered pages, the 404
//! page, the service-status server function, and the app over a real socket.

use crate::common;

use common::TestApp;

use axum::http::StatusCode;
use sqlx::PgPool;

#[sqlx::test(migrations = false)]
async fn healthz_reports_ok_json_when_the_database_answers(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let reply = common::get(&app, "/healthz").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "application/json");
    let body = reply.json();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["database"], "ok");
    // No listener runs in this in-process app: it says so rather than pretending.
    assert_eq!(body["listener"], "disconnected");
    assert_eq!(body["waiters"], 0);
    assert_eq!(body["max_waiters"], 64);
}

#[sqlx::test(migrations = false)]
async fn metrics_are_prometheus_text_with_jobs_waiters_receipts_and_wake_latency(pool: PgPool) {
    crate::common::schema(&pool).await;
    sqlx::query("INSERT INTO jobs (kind, state) VALUES ('system.noop', 'completed'), ('system.noop', 'available')")
        .execute(&pool)
        .await
        .unwrap();
    // Without a metrics token only loopback clients are answered.
    let desk = TestApp::builder(pool.clone()).spawn().await;
    let from_afar = common::get(&desk, "/metrics").await;
    assert_eq!(from_afar.status, StatusCode::FORBIDDEN);
    let app = desk.router_from(std::net::SocketAddr::from(([127, 0, 0, 1], 40000)));
    let reply = common::get(&app, "/metrics").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .contains("openmetrics-text")
    );
    let text = &reply.body;
    for expected in [
        r#"standmeet_jobs{state="completed",kind="system.noop"} 1"#,
        r#"standmeet_jobs{state="available",kind="system.noop"} 1"#,
        "standmeet_waiters 0",
        "standmeet_waiters_max 64",
        "standmeet_receipts_total 0",
        "# TYPE standmeet_wake_latency_seconds histogram",
        r#"standmeet_wake_latency_seconds_bucket{le="0.003"} 0"#,
        "standmeet_listener_connected 0",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));

    // A proxy on this host that is not trusted forwards for somebody else: that client
    // is not this host, whatever the socket says.
    for (header, value) in [
        ("x-forwarded-for", "203.0.113.9"),
        ("forwarded", "for=203.0.113.9"),
    ] {
        let request = axum::http::Request::get("/metrics")
            .header(header, value)
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(
            common::send(&app, request).await.status,
            StatusCode::FORBIDDEN,
            "{header}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn with_a_metrics_token_the_metrics_need_it_from_anywhere(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool)
        .setting("STANDMEET_METRICS_TOKEN", "metrics-token-0123456789")
        .spawn()
        .await;
    let without = common::get(&app, "/metrics").await;
    assert_eq!(without.status, StatusCode::UNAUTHORIZED);
    for (authorization, status) in [
        ("Bearer wrong", StatusCode::UNAUTHORIZED),
        ("Bearer metrics-token-0123456789", StatusCode::OK),
        ("bearer metrics-token-0123456789", StatusCode::OK),
    ] {
        let request = axum::http::Request::get("/metrics")
            .header("authorization", authorization)
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(
            common::send(&app, request).await.status,
            status,
            "{authorization}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn healthz_answers_503_when_the_database_is_gone(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    pool.close().await;
    for path in ["/healthz", "/readyz"] {
        let reply = common::get(&app, path).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        let body = reply.json();
        assert_eq!(body["status"], "degraded");
        assert_eq!(body["database"], "unavailable");
    }
    // Alive all the same: a restart would not bring the database back.
    let live = common::get(&app, "/livez").await;
    assert_eq!(live.status, StatusCode::OK);
    assert_eq!(live.json()["status"], "live");
}

#[sqlx::test(migrations = false)]
async fn livez_and_readyz_answer_200_while_all_is_well(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    for path in ["/livez", "/readyz"] {
        let reply = common::get(&app, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
    }
    assert_eq!(common::get(&app, "/readyz").await.json()["database"], "ok");
}

#[sqlx::test(migrations = false)]
async fn the_home_page_is_rendered_on_the_server_with_the_shell(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let reply = common::get(&app, "/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = &reply.body;
    assert!(html.contains(">StandMeet<"), "{html}");
    // No name set yet: the neutral heading (a text node the browser may replace, so
    // Leptos marks its end with `<!>`).
    assert!(html.contains(">The owner's front desk<!></h1>"), "{html}");
    assert!(!html.contains("Check the service"), "{html}");
    assert!(
        html.contains(r#"role="status""#),
        "the toast region is on every page"
    );
    // By its hashed name, as the build named it (`hash.txt` beside the binary).
    assert!(
        html.contains(r#"href="/pkg/standmeet."#) && html.contains(r#".css""#),
        "the stylesheet is linked: {html}"
    );
    for (href, _) in standmeet::ui::layout::VISITOR_PAGES {
        assert!(
            html.contains(&format!(r#"href="{href}""#)),
            "visitor nav link {href}"
        );
    }
    // Admin links are for a signed-in admin only.
    for (href, _) in standmeet::ui::layout::ADMIN_PAGES {
        assert!(
            !html.contains(&format!(r#"href="{href}""#)),
            "no admin link {href} for a visitor"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_signed_in_admin_has_one_way_into_the_console_from_the_visitor_pages(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let home = common::get_with_cookie(&app, "/", &cookie).await;
    assert!(
        home.body.contains(r#"data-testid="admin-link""#) && home.body.contains(r#"href="/admin""#),
        "the Admin link: {}",
        home.body
    );
    // Not every admin page: the console's sidebar has them.
    for (href, _) in standmeet::ui::layout::ADMIN_PAGES
        .iter()
        .filter(|(href, _)| *href != "/admin")
    {
        assert!(
            !home.body.contains(&format!(r#"href="{href}""#)),
            "no header link to {href}"
        );
    }
    // A visitor gets none.
    let visitor = common::get(&app, "/").await;
    assert!(!visitor.body.contains(r#"data-testid="admin-link""#));
    // The console's own pages have every link, in the sidebar.
    let console = common::get_with_cookie(&app, "/admin", &cookie).await;
    for (href, _) in standmeet::ui::layout::ADMIN_PAGES {
        assert!(
            console.body.contains(&format!(r#"href="{href}""#)),
            "sidebar link {href}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_visitors_page_comes_without_the_apps_code_and_a_console_page_with_it(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let app_code = |html: &str| html.contains(".wasm");
    for path in [
        "/",
        "/search?q=notes",
        "/request-access",
        "/access",
        "/book",
        "/login",
    ] {
        // Signed in or not: what a visitor's page is does not depend on who reads it.
        for reply in [
            common::get(&app, path).await,
            common::get_with_cookie(&app, path, &cookie).await,
        ] {
            assert_eq!(reply.status, StatusCode::OK, "{path}");
            assert!(
                !app_code(&reply.body),
                "{path} names the app's code: {}",
                reply.body
            );
            // Its one script, inline, admitted by the page's nonce.
            let policy = reply.headers["content-security-policy"].to_str().unwrap();
            let nonce = policy
                .split("'nonce-")
                .nth(1)
                .and_then(|rest| rest.split('\'').next())
                .expect("the page's policy has a nonce");
            assert!(
                reply.body.contains(&format!(r#"<script nonce="{nonce}">"#)),
                "{path} carries its script with the nonce: {}",
                reply.body
            );
        }
    }
    for path in ["/admin", "/admin/tasks", "/admin/access-requests"] {
        let reply = common::get_with_cookie(&app, path, &cookie).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert!(app_code(&reply.body), "{path} is hydrated: {}", reply.body);
    }
}

/// A console page's code comes in pieces (`ui::lazy_pages`): the app's shell and the
/// files of the page's group. The page names them all in `Link` headers, the shell
/// first, so that a browser fetches them at once; each is a file of this build. A
/// visitor's page, which carries no code, names none.
#[sqlx::test(migrations = false)]
async fn a_console_page_has_the_browser_fetch_its_code_at_once(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let links = |headers: &axum::http::HeaderMap| -> Vec<String> {
        headers
            .get_all("link")
            .iter()
            .map(|value| value.to_str().unwrap().to_string())
            .collect()
    };
    let target = |link: &str| -> String {
        link.split_once('<')
            .and_then(|(_, rest)| rest.split_once('>'))
            .map(|(target, _)| target.to_string())
            .unwrap_or_else(|| panic!("a link names its target: {link}"))
    };
    let visitor = common::get(&app, "/").await;
    assert_eq!(links(&visitor.headers), Vec::<String>::new());

    let mut groups = std::collections::BTreeSet::new();
    for path in [
        "/admin",
        "/admin/tasks",
        "/admin/queues",
        "/admin/access-requests",
        "/admin/corpus",
    ] {
        let reply = common::get_with_cookie(&app, path, &cookie).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        let links = links(&reply.headers);
        assert!(links.len() >= 3, "{path}: {links:?}");
        // The shell first, as the page's own <head> names it: the wasm, then its script.
        let (wasm, script) = (target(&links[0]), target(&links[1]));
        assert!(
            links[0].contains("rel=preload") && wasm.ends_with(".wasm"),
            "{links:?}"
        );
        assert!(
            reply.body.contains(&format!(r#"href="{wasm}""#)),
            "{path}: {wasm}"
        );
        assert!(links[1].contains("rel=modulepreload"), "{links:?}");
        assert!(
            reply.body.contains(&format!(r#"href="{script}""#)),
            "{path}: {script}"
        );
        assert!(
            target(&links[2]).starts_with("/pkg/__wasm_split."),
            "{links:?}"
        );
        for link in &links {
            let file =
                std::path::Path::new("target/site").join(target(link).trim_start_matches('/'));
            assert!(
                file.is_file(),
                "{path} names {link}, which the build did not make"
            );
        }
        let group = links
            .iter()
            .map(|link| target(link))
            .find(|target| target.starts_with("/pkg/split_"));
        if path == "/admin" || path == "/admin/tasks" {
            // The jobs' pages are in the shell: nothing more to fetch.
            assert_eq!(links.len(), 3, "{path}: {links:?}");
        } else {
            groups.insert(group.unwrap_or_else(|| panic!("{path} names its group: {links:?}")));
        }
    }
    // The engine's other views, people's and content's: three groups, three files.
    assert_eq!(groups.len(), 3, "{groups:?}");
}

#[sqlx::test(migrations = false)]
async fn every_admin_page_renders_in_the_layout_for_a_signed_in_admin(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    for (path, title) in standmeet::ui::layout::ADMIN_PAGES {
        let reply = common::get_with_cookie(&app, path, &cookie).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert!(reply.body.contains("<h1"), "{path}");
        assert!(reply.body.contains(title), "{path} shows {title}");
        assert!(
            reply.body.contains(r#"aria-current="page""#),
            "{path} is marked current"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn an_unknown_address_answers_404_with_a_page(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let reply = common::get(&app, "/no/such/page").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.body.contains("Page not found"), "{}", reply.body);
}

#[sqlx::test(migrations = false)]
async fn the_front_page_is_open_to_visitors_and_set_by_admins_with_checked_input(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let fresh = common::get(&app, "/api/front_page").await;
    assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.body);
    assert_eq!(fresh.json()["owner_name"], serde_json::Value::Null);
    // Setting it is for admins.
    let anonymous = app
        .post_form(
            "/api/front_page/save",
            &[("owner_name", "Mallory"), ("introduction", "")],
            None,
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let cookie = app.sign_in_admin().await;
    // A blank name is refused with words, and changes nothing.
    let blank = app
        .post_form(
            "/api/front_page/save",
            &[("owner_name", "  "), ("introduction", "Hi")],
            Some(&cookie),
        )
        .await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST, "{}", blank.body);
    assert!(blank.body.contains("Give the name"), "{}", blank.body);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM front_page")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    let saved = app
        .post_form(
            "/api/front_page/save",
            &[
                ("owner_name", "Ada"),
                ("introduction", "I *build* engines."),
            ],
            Some(&cookie),
        )
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    let page = common::get(&app, "/api/front_page").await.json();
    assert_eq!(page["owner_name"], "Ada");
    assert_eq!(
        page["introduction_html"],
        "<p>I <em>build</em> engines.</p>\n"
    );
    let home = common::get(&app, "/").await;
    assert!(home.body.contains(">Ada<!></h1>"), "{}", home.body);
}

#[sqlx::test(migrations = false)]
async fn every_response_carries_a_request_id(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let reply = common::get(&app, "/healthz").await;
    let id = reply.headers.get("x-request-id").expect("x-request-id");
    assert!(!id.to_str().unwrap().is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_request_id_that_could_forge_log_fields_is_replaced_and_a_plain_one_kept(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    assert_eq!(
        answered_request_id(&app, "req-42.a_B").await,
        "req-42.a_B",
        "a plain id is kept"
    );
    let too_long = "x".repeat(65);
    for forged in [
        "x status=200 client=10.0.0.1",
        "quote\"",
        "a=b",
        "",
        too_long.as_str(),
    ] {
        let answered = answered_request_id(&app, forged).await;
        assert_ne!(answered, forged);
        assert!(
            standmeet::telemetry::is_usable_request_id(answered.as_bytes()),
            "a new id, not {forged:?}: {answered:?}"
        );
    }
}

/// The `x-request-id` answered to a request that sent `id`.
async fn answered_request_id(app: &TestApp, id: &str) -> String {
    let request = axum::http::Request::get("/livez")
        .header("x-request-id", id)
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = app.send(request).await;
    reply.headers["x-request-id"].to_str().unwrap().to_string()
}

/// A connection that has not sent its headers within `STANDMEET_HEADER_TIMEOUT_MS` is
/// closed; one that sends them in time is answered.
#[sqlx::test(migrations = false)]
async fn a_connection_that_trickles_its_headers_is_closed_after_the_header_timeout(pool: PgPool) {
    crate::common::schema(&pool).await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::builder(pool)
        .setting("STANDMEET_HEADER_TIMEOUT_MS", "500")
        .spawn()
        .await;
    let mut slow = tokio::net::TcpStream::connect(app.address).await.unwrap();
    slow.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    // A byte now and then, never the end of the headers: the server closes it.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buffer = [0u8; 1024];
        loop {
            let _ = slow.write_all(b"X").await;
            match tokio::time::timeout(
                std::time::Duration::from_millis(100),
                slow.read(&mut buffer),
            )
            .await
            {
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(n)) => answer.extend_from_slice(&buffer[..n]),
                Err(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the trickling connection is still open");
    let took = started.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(400),
        "closed at the timeout, not before: {took:?}"
    );
    // What it got, if anything, is hyper's 408 for a request whose headers timed out.
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.contains("408"), "{answer}");
    let reply = reqwest::get(app.url("/livez")).await.unwrap();
    assert_eq!(reply.status(), reqwest::StatusCode::OK);
}

#[sqlx::test(migrations = false)]
async fn a_test_app_is_served_over_real_http_on_a_port_of_its_own(pool: PgPool) {
    crate::common::schema(&pool).await;
    // The in-process router and the socket serve one app: the listener the engine
    // connected is the one /healthz reports over the network.
    let app = common::TestApp::builder(pool).jobs().spawn().await;
    common::jobs::wait_until(std::time::Duration::from_secs(10), || async {
        app.state.jobs.listener_connected()
    })
    .await;
    let reply = reqwest::get(app.url("/healthz"))
        .await
        .expect("the server answers on its port");
    assert_eq!(reply.status(), reqwest::StatusCode::OK);
    assert!(reply.headers().contains_key("x-request-id"));
    let body: serde_json::Value = reply.json().await.expect("a JSON body");
    assert_eq!(body["database"], "ok", "{body}");
    assert_eq!(body["listener"], "connected", "{body}");
}

#[sqlx::test(migrations = false)]
async fn pages_are_gzipped_for_clients_that_take_it(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let request = axum::http::Request::get("/")
        .header("accept-encoding", "gzip")
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = common::send(&app, request).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-encoding"], "gzip");
    // A client that does not say so gets plain text.
    let plain = common::get(&app, "/").await;
    assert!(plain.headers.get("content-encoding").is_none());
    assert!(plain.body.contains("StandMeet"));
}

#[sqlx::test(migrations = false)]
async fn the_pkg_files_are_revalidated_and_nothing_else_is_kept(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let css = common::get(&app, "/pkg/standmeet.css").await;
    assert_eq!(css.headers["cache-control"], "no-cache", "{}", css.status);
    let page = common::get(&app, "/search").await;
    assert_eq!(page.headers["cache-control"], "no-store");
}

/// The hashed files of the site `scripts/build` made (`target/site/pkg`) by their
/// extension, for the tests that fetch them as a browser does.
fn built_site_file(extension: &str) -> (String, std::path::PathBuf) {
    let pkg = std::path::Path::new("target/site/pkg");
    let name = std::fs::read_dir(pkg)
        .expect("scripts/build made target/site/pkg")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .find(|name| {
            name.starts_with("standmeet.")
                && name.ends_with(&format!(".{extension}"))
                && name.matches('.').count() == 2
        })
        .unwrap_or_else(|| panic!("no hashed .{extension} in {}", pkg.display()));
    (format!("/pkg/{name}"), pkg.join(name))
}

async fn fetch_bytes(
    app: &TestApp,
    path: &str,
    accept_encoding: Option<&str>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    use tower::ServiceExt;
    let mut request = axum::http::Request::get(path);
    if let Some(accepted) = accept_encoding {
        request = request.header("accept-encoding", accepted);
    }
    let response = app
        .router
        .clone()
        .oneshot(request.body(axum::body::Body::empty()).unwrap())
        .await
        .unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let body = axum::body::to_bytes(response.into_body(), 256 * 1024 * 1024)
        .await
        .unwrap();
    (status, headers, body.to_vec())
}

#[sqlx::test(migrations = false)]
async fn the_pkg_files_go_as_the_build_compressed_them_to_whoever_takes_it(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    for extension in ["wasm", "js", "css"] {
        let (path, on_disk) = built_site_file(extension);
        let plain = std::fs::read(&on_disk).unwrap();
        for (accepted, encoding, copy) in [
            (Some("gzip, deflate, br, zstd"), Some("br"), ".br"),
            (Some("gzip"), Some("gzip"), ".gz"),
            (None, None, ""),
        ] {
            let (status, headers, body) = fetch_bytes(&app, &path, accepted).await;
            assert_eq!(status, StatusCode::OK, "{path} for {accepted:?}");
            assert_eq!(
                headers
                    .get("content-encoding")
                    .and_then(|v| v.to_str().ok()),
                encoding,
                "{path} for {accepted:?}"
            );
            // The build's own copy, byte for byte: nothing compressed it again.
            let expected = std::fs::read(format!("{}{copy}", on_disk.display()))
                .unwrap_or_else(|_| panic!("scripts/build wrote {}{copy}", on_disk.display()));
            assert!(
                body == expected,
                "{path} for {accepted:?}: not the build's {copy:?} copy"
            );
            assert!(
                copy.is_empty() || body.len() < plain.len() / 2,
                "{path}{copy}"
            );
            assert_eq!(headers["vary"], "accept-encoding", "{path}");
            assert_eq!(headers["cache-control"], standmeet::assets::IMMUTABLE);
        }
    }
    let (_, headers, _) = fetch_bytes(&app, &built_site_file("wasm").0, Some("br")).await;
    assert_eq!(headers["content-type"], "application/wasm");
}

/// The GET server functions that cannot answer without an argument, and the one the
/// browser always sends them (a page's id, a typed search, a link's token). Every other
/// GET server function must decode a request that sets nothing.
const GET_SERVER_FNS_WITH_A_REQUIRED_ARGUMENT: &[(&str, &str)] = &[
    ("/api/confirm_email/preview", "token"),
    ("/api/corpus/entry", "id"),
    ("/api/entry", "id"),
    ("/api/search", "q"),
    ("/api/tasks/detail", "id"),
    ("/api/webhooks/delivery", "id"),
    ("/api/webhooks/detail", "id"),
];

#[sqlx::test(migrations = false)]
async fn every_get_server_function_decodes_a_request_that_sets_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    // A filter with nothing chosen, or a list with no id, is encoded as no key at all:
    // the Tasks panel with no row polled `tasks/list` with an empty query string, and the
    // server answered `400 Args|missing field 'query'` every two seconds.
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let get_fns: Vec<&str> = standmeet::api::server_functions()
        .into_iter()
        .filter(|function| function.get)
        .map(|function| function.path)
        .collect();
    assert!(get_fns.contains(&"/api/tasks/list"), "{get_fns:?}");
    for (path, _) in GET_SERVER_FNS_WITH_A_REQUIRED_ARGUMENT {
        assert!(
            get_fns.contains(path),
            "{path} is no longer a GET server function"
        );
    }

    let mut failures = Vec::new();
    for path in &get_fns {
        let reply = common::get_with_cookie(&app, path, &cookie).await;
        let decoding_error = reply.body.starts_with("Args|");
        match GET_SERVER_FNS_WITH_A_REQUIRED_ARGUMENT
            .iter()
            .find(|(listed, _)| listed == path)
        {
            Some((_, required)) => {
                if decoding_error && reply.body != format!("Args|missing field `{required}`") {
                    failures.push(format!("{path}: {} {}", reply.status, reply.body));
                }
            }
            None => {
                if decoding_error || reply.status.is_server_error() {
                    failures.push(format!("{path}: {} {}", reply.status, reply.body));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "GET server functions that cannot take a request with nothing set (give the \
         argument #[server(default)], or list it above if the browser always sends it):\n{}",
        failures.join("\n")
    );
}

/// Writes `head` and then `body_bytes` bytes of `x` to the app's real socket, all of it
/// before reading (as curl, Python and most SDKs do), then reads the whole answer.
async fn write_everything_then_read(app: &TestApp, head: &str, body_bytes: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.url("").trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    let mut left = body_bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        socket
            .write_all(&chunk[..n])
            .await
            .expect("the server reads the whole body (no reset while the client writes)");
        left -= n;
    }
    let mut answer = Vec::new();
    socket
        .read_to_end(&mut answer)
        .await
        .expect("the answer is readable after the whole body was written");
    String::from_utf8_lossy(&answer).into_owned()
}

#[sqlx::test(migrations = false)]
async fn a_body_over_the_limit_is_answered_413_in_words_to_a_client_that_writes_it_all_first(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone())
        .setting("STANDMEET_MCP_TOKEN", common::mcp::TOKEN)
        .spawn()
        .await;
    let twenty_mb = 20 * 1024 * 1024;
    for (path, extra) in [
        (
            "/api/corpus/create",
            "Content-Type: application/x-www-form-urlencoded\r\n",
        ),
        (
            "/login",
            "Content-Type: application/x-www-form-urlencoded\r\n",
        ),
        (
            "/mcp",
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
        ),
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: same-origin\r\nAuthorization: Bearer {}\r\n{extra}Content-Length: {twenty_mb}\r\nConnection: close\r\n\r\n",
            common::mcp::TOKEN
        );
        let answer = write_everything_then_read(&app, &head, twenty_mb).await;
        assert!(
            answer.starts_with("HTTP/1.1 413"),
            "{path}: {}",
            &answer[..answer.len().min(400)]
        );
        assert!(
            answer.contains("larger than StandMeet takes (2 MiB)"),
            "{path}: {answer}"
        );
        if path == "/mcp" {
            assert!(
                answer.contains("\"jsonrpc\":\"2.0\"") && answer.contains("-32600"),
                "{answer}"
            );
        }
    }
    // Without a declared length (chunked), the same.
    let chunk = "x".repeat(1024 * 1024);
    let mut body = String::new();
    for _ in 0..3 {
        body.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    body.push_str("0\r\n\r\n");
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: same-origin\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{body}"
    );
    let answer = write_everything_then_read(&app, &head, 0).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{}",
        &answer[..answer.len().min(400)]
    );
    // A client that asks first (Expect: 100-continue) is told before it sends anything.
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\nContent-Length: {twenty_mb}\r\nConnection: close\r\n\r\n"
    );
    let answer = write_everything_then_read(&app, &head, 0).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{}",
        &answer[..answer.len().min(400)]
    );
    // Nothing was written; a body under the limit still works.
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM corpus_entries").await,
        0
    );
    let password = "x".repeat(1_000_000);
    let fine = common::post_form(
        &app,
        "/login",
        &[("email", "a@example.com"), ("password", &password)],
        None,
    )
    .await;
    assert_ne!(fine.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(!fine.status.is_server_error(), "{}", fine.status);
}

#[sqlx::test(migrations = false)]
async fn text_postgresql_cannot_store_is_a_400_in_words_wherever_it_is_written(pool: PgPool) {
    crate::common::schema(&pool).await;
    // What any query that writes a request's text meets: a NUL in text (22021), and
    // `\u0000` in JSON (22P05). Recognised where database errors become answers, not
    // field by field.
    let nul_text = sqlx::query("SELECT $1::text")
        .bind("a\0b")
        .execute(&pool)
        .await
        .unwrap_err();
    let nul_json = sqlx::query("SELECT $1::text::jsonb")
        .bind(r#"{"a": "\u0000"}"#)
        .execute(&pool)
        .await
        .unwrap_err();
    for err in [nul_text, nul_json] {
        let code = err
            .as_database_error()
            .and_then(|db| db.code())
            .unwrap()
            .into_owned();
        let app_error = standmeet::error::AppError::from(anyhow::Error::from(err));
        assert_eq!(app_error.status(), StatusCode::BAD_REQUEST, "{code}");
        assert!(app_error.public_message().contains("NUL"), "{code}");
    }
    // Another database error is still ours, and says nothing of itself.
    let other = sqlx::query("SELECT 1/0").execute(&pool).await.unwrap_err();
    let app_error = standmeet::error::AppError::from(other);
    assert_eq!(app_error.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        app_error.public_message(),
        standmeet::error::INTERNAL_MESSAGE
    );
}
