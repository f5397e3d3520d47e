//! Admin sign-in and the protections every request inherits: the admin guard, session
//! cookie flags, sign-in rate limits, cross-site refusal and security headers.

use crate::common;

use common::TestApp;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use sqlx::PgPool;
use standmeet::domain::admins;
use standmeet::ui::layout::ADMIN_PAGES;

#[sqlx::test(migrations = false)]
async fn anonymous_visitors_of_every_admin_page_are_sent_to_login_with_next(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let mut paths: Vec<String> = ADMIN_PAGES
        .iter()
        .map(|(path, _)| path.to_string())
        .collect();
    paths.push("/admin/tasks?state=running".into());
    for path in paths {
        let reply = common::get(&app, &path).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{path}");
        let expected = format!(
            "/login?next={}",
            url::form_urlencoded::byte_serialize(path.as_bytes()).collect::<String>()
        );
        assert_eq!(reply.location(), Some(expected.as_str()), "{path}");
    }
}

#[sqlx::test(migrations = false)]
async fn anonymous_calls_of_admin_server_functions_get_401_and_public_ones_work(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    // Every server function not listed as public is an admin one, including any that
    // is added later: here, one that does not exist yet.
    for path in ["/api/approve_access_request", "/api/anything_added_later"] {
        let reply = common::send(
            &app,
            Request::post(path)
                .header("sec-fetch-site", "same-origin")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(reply.body.contains("Sign in"), "{path}: {}", reply.body);
    }
    // The public ones are let through (some want a POST with fields; they are not
    // turned away for want of a session).
    for path in standmeet::security::guard::PUBLIC_SERVER_FUNCTIONS {
        let reply = common::get(&app, path).await;
        assert_ne!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{path}: {}",
            reply.body
        );
    }
    assert_eq!(
        common::get(&app, "/api/front_page").await.status,
        StatusCode::OK
    );
}

#[sqlx::test(migrations = false)]
async fn signing_in_sets_a_strict_http_only_cookie_and_opens_the_admin_pages(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    common::create_admin(&pool).await;

    let reply = common::sign_in(&app, common::ADMIN_EMAIL, common::ADMIN_PASSWORD).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(reply.location(), Some("/admin"));
    let set_cookie = reply.session_set_cookie().expect("a session cookie");
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    assert!(!set_cookie.contains("Secure"), "plain http: {set_cookie}");
    assert!(
        set_cookie.contains("Max-Age="),
        "expires on inactivity: {set_cookie}"
    );

    let cookie = reply.session_cookie().unwrap();
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(common::ADMIN_EMAIL),
        "the header names the admin"
    );
    assert!(page.body.contains("Sign out"));
}

#[sqlx::test(migrations = false)]
async fn the_session_cookie_is_secure_when_the_public_url_is_https(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone())
        .setting("STANDMEET_PUBLIC_URL", "https://desk.example.org")
        .spawn()
        .await;
    common::create_admin(&pool).await;
    let reply = common::sign_in(&app, common::ADMIN_EMAIL, common::ADMIN_PASSWORD).await;
    let set_cookie = reply.session_set_cookie().expect("a session cookie");
    assert!(set_cookie.contains("Secure"), "{set_cookie}");
    // `__Host-`: Secure, Path=/ and no Domain, or browsers refuse it.
    assert!(
        set_cookie.starts_with("__Host-standmeet_session="),
        "{set_cookie}"
    );
    assert!(set_cookie.contains("Path=/"), "{set_cookie}");
    assert!(
        !set_cookie.to_lowercase().contains("domain="),
        "{set_cookie}"
    );
    // The session it names opens the admin pages (the server reads it back).
    let cookie = reply.session_cookie().unwrap();
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    // Over https, browsers are told to stay on https.
    assert_eq!(
        page.headers["strict-transport-security"],
        "max-age=63072000"
    );
}

#[sqlx::test(migrations = false)]
async fn over_http_there_is_no_hsts_and_answers_are_not_kept(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.headers.get("strict-transport-security").is_none());
    // Neither pages (who is signed in) nor answers (secrets) may be kept by a cache.
    assert_eq!(page.headers["cache-control"], "no-store");
    let answer = common::get_with_cookie(&app, "/api/webhooks/list", &cookie).await;
    assert_eq!(answer.headers["cache-control"], "no-store");
    let home = common::get(&app, "/").await;
    assert_eq!(home.headers["cache-control"], "no-store");
}

#[sqlx::test(migrations = false)]
async fn sign_in_returns_to_next_only_when_it_is_on_this_site(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    common::create_admin(&pool).await;
    for (next, expected) in [
        ("/admin/mail?page=2", "/admin/mail?page=2"),
        ("//evil.example/phish", "/admin"),
        ("https://evil.example/", "/admin"),
    ] {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("email", common::ADMIN_EMAIL)
            .append_pair("password", common::ADMIN_PASSWORD)
            .append_pair("next", next)
            .finish();
        let reply = common::send(
            &app,
            Request::post("/login")
                .header("content-type", "application/x-www-form-urlencoded")
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
        assert_eq!(reply.location(), Some(expected), "next={next}");
    }
}

#[sqlx::test(migrations = false)]
async fn a_wrong_password_and_an_unknown_email_get_the_same_answer_and_no_session(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    common::create_admin(&pool).await;

    let wrong_password = common::sign_in(&app, common::ADMIN_EMAIL, "not the password").await;
    let unknown_email = common::sign_in(&app, "nobody@example.com", "not the password").await;
    assert_eq!(wrong_password.status, StatusCode::SEE_OTHER);
    assert_eq!(unknown_email.status, StatusCode::SEE_OTHER);
    let strip_email = |location: &str| location.split("&email=").next().unwrap().to_string();
    assert_eq!(
        strip_email(wrong_password.location().unwrap()),
        strip_email(unknown_email.location().unwrap())
    );
    assert!(
        wrong_password
            .location()
            .unwrap()
            .starts_with("/login?error=invalid")
    );
    assert!(wrong_password.session_cookie().is_none());
    assert!(unknown_email.session_cookie().is_none());

    let page = common::get(&app, wrong_password.location().unwrap()).await;
    assert!(
        page.body.contains("Wrong email or password."),
        "{}",
        page.body
    );
}

#[sqlx::test(migrations = false)]
async fn the_eleventh_quick_wrong_sign_in_from_one_address_is_rate_limited(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    common::create_admin(&pool).await;
    for attempt in 1..=10 {
        let reply = common::sign_in(&app, &format!("guess{attempt}@example.com"), "wrong").await;
        assert!(
            reply
                .location()
                .unwrap()
                .starts_with("/login?error=invalid"),
            "attempt {attempt}"
        );
    }
    let reply = common::sign_in(&app, "guess11@example.com", "wrong").await;
    let location = reply.location().unwrap();
    assert!(
        location.starts_with("/login?error=rate_limited"),
        "{location}"
    );
    // Even the right password waits now: the limit is on attempts, not on failures.
    let reply = common::sign_in(&app, common::ADMIN_EMAIL, common::ADMIN_PASSWORD).await;
    assert!(
        reply
            .location()
            .unwrap()
            .starts_with("/login?error=rate_limited")
    );
    assert!(reply.session_cookie().is_none());

    let page = common::get(&app, location).await;
    assert!(
        page.body.contains("Too many sign-in attempts"),
        "{}",
        page.body
    );
}

#[sqlx::test(migrations = false)]
async fn parallel_wrong_sign_ins_from_one_address_get_no_more_checks_than_the_limit(pool: PgPool) {
    crate::common::schema(&pool).await;
    use std::net::SocketAddr;
    common::create_admin(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    // 200 wrong passwords posted at once from one address (and from one IPv6 /64:
    // the addresses differ in their last 64 bits only): the checks under way count
    // as failures, so no more than the 10 a minute are checked.
    let attacker = |n: u16| {
        app.router_from(SocketAddr::from((
            [0x2001, 0xdb8, 0x66, 0x1, 0, 0, n >> 8, n & 0xff],
            40000,
        )))
    };
    let routers: Vec<_> = (0..200).map(attacker).collect();
    let replies = futures_util::future::join_all(routers.iter().enumerate().map(|(n, router)| {
        let email = format!("guess{n}@example.com");
        async move { common::sign_in(router, &email, "a wrong guess").await }
    }))
    .await;
    let outcome = |prefix: &str| {
        replies
            .iter()
            .filter(|reply| reply.location().unwrap().starts_with(prefix))
            .count()
    };
    assert_eq!(outcome("/login?error=invalid"), 10);
    assert_eq!(outcome("/login?error=rate_limited"), 190);
}

#[sqlx::test(migrations = false)]
async fn the_right_password_gets_in_while_another_address_hammers_the_same_email(pool: PgPool) {
    crate::common::schema(&pool).await;
    use std::net::SocketAddr;
    common::create_admin(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    // Two clients of one StandMeet: an attacker and the owner, from different addresses.
    let attacker = app.router_from(SocketAddr::from(([198, 51, 100, 66], 40000)));
    let owner = app.router_from(SocketAddr::from(([192, 0, 2, 10], 40000)));
    let mut outcomes = Vec::new();
    for _ in 0..25 {
        let reply = common::sign_in(&attacker, common::ADMIN_EMAIL, "a wrong guess").await;
        let location = reply.location().unwrap().to_string();
        outcomes.push(location.split('&').next().unwrap().to_string());
    }
    let refused = outcomes
        .iter()
        .filter(|outcome| outcome.as_str() == "/login?error=rate_limited")
        .count();
    assert_eq!(
        refused, 15,
        "ten failures, then the address is refused: {outcomes:?}"
    );
    // The email is not locked: its owner, from an address that is not over its limit,
    // signs in (after the email's backoff, a few seconds at most).
    let reply = common::sign_in(&owner, common::ADMIN_EMAIL, common::ADMIN_PASSWORD).await;
    assert_eq!(reply.location(), Some("/admin"));
    assert!(reply.session_cookie().is_some());
    // Requests the attacker's address had refused did not count against the owner.
    let again = common::sign_in(&attacker, common::ADMIN_EMAIL, common::ADMIN_PASSWORD).await;
    assert!(
        again
            .location()
            .unwrap()
            .starts_with("/login?error=rate_limited"),
        "the attacker's address stays refused for its minute, right password or not"
    );
}

#[sqlx::test(migrations = false)]
async fn signing_out_ends_the_session(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let reply = common::send(
        &app,
        Request::post("/logout")
            .header("cookie", &cookie)
            .header("sec-fetch-site", "same-origin")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(reply.location(), Some("/login"));
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(
        page.status,
        StatusCode::SEE_OTHER,
        "the old cookie opens nothing"
    );
}

#[sqlx::test(migrations = false)]
async fn a_cross_site_post_is_refused_with_403_and_changes_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    for (name, value) in [
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let reply = common::send(
            &app,
            Request::post("/logout")
                .header("cookie", &cookie)
                .header("host", "127.0.0.1:3000")
                .header(name, value)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{name}: {value}");
        assert!(reply.body.contains("another site"), "{}", reply.body);
    }
    // The session survived both attempts.
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);

    // A same-origin post passes.
    let reply = common::send(
        &app,
        Request::post("/logout")
            .header("cookie", &cookie)
            .header("host", "127.0.0.1:3000")
            .header("origin", "http://127.0.0.1:3000")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
}

#[sqlx::test(migrations = false)]
async fn pages_carry_a_nonce_policy_that_admits_the_hydration_script(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    for path in ["/", "/login", "/no/such/page"] {
        let reply = common::get(&app, path).await;
        let policy = reply.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
        assert!(policy.contains("'wasm-unsafe-eval'"), "{path}: {policy}");
        let nonce = policy
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_else(|| panic!("{path}: no nonce in {policy}"));
        // Its inline script carries the nonce: a visitor's page has its own small one
        // (`ui/desk.js`), a console page the hydration script (below).
        assert!(
            reply.body.contains(&format!(r#" nonce="{nonce}">"#)),
            "{path}: {}",
            reply.body
        );
        assert!(!policy.contains("unsafe-inline"), "{path}: {policy}");
        assert_eq!(reply.headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(reply.headers["referrer-policy"], "same-origin", "{path}");
    }
    // A console page starts its hydration with a script that carries the nonce.
    let cookie = common::signed_in_cookie(&app, &pool).await;
    let console = common::get_with_cookie(&app, "/admin", &cookie).await;
    let policy = console.headers["content-security-policy"].to_str().unwrap();
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a nonce");
    assert!(
        console
            .body
            .contains(&format!(r#"<script type="module" nonce="{nonce}">"#)),
        "{}",
        console.body
    );
    // Two pages, two nonces.
    let a = common::get(&app, "/").await.headers["content-security-policy"].clone();
    let b = common::get(&app, "/").await.headers["content-security-policy"].clone();
    assert_ne!(a, b);
}

#[sqlx::test(migrations = false)]
async fn responses_that_are_not_pages_allow_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    let reply = common::get(&app, "/healthz").await;
    let policy = reply.headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");
}

/// A server function is not a part of the page this thread rendered last. Leptos keeps
/// a page's root owner as the thread's current one; a server function's owner made
/// under it became that page's child and read the page's context: its answer carried
/// the page's nonce. And when the page's last reference went while the server function
/// read through it, the page was dropped on that thread and cleaned its children,
/// the server function's owner too, whose lock that thread held: the thread waited for
/// itself for ever (a request never answered, a copy that did not stop).
#[sqlx::test(migrations = false)]
async fn a_server_function_is_no_part_of_a_page_being_sent(pool: PgPool) {
    use tower::ServiceExt;
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool).spawn().await;
    // A page on its way out: answered, its body not read yet, so its owner lives. The
    // test's runtime has one thread, so the server function below runs on this one.
    let page = app
        .router
        .clone()
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let page_policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(page_policy.contains("'nonce-"), "{page_policy}");
    // The page's owner was not left as the thread's.
    assert!(leptos::prelude::Owner::current().is_none());

    let reply = common::post_form(
        &app,
        "/api/request_access",
        &[
            ("name", "Ada"),
            ("email", "ada@example.com"),
            ("message", "Hello"),
        ],
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let policy = reply.headers["content-security-policy"].to_str().unwrap();
    assert!(
        policy.starts_with("default-src 'none'"),
        "a server function's answer took the page's policy: {policy}"
    );
    // The page is still whole.
    let body = axum::body::to_bytes(page.into_body(), 16 * 1024 * 1024)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("</html>"));
}

#[sqlx::test(migrations = false)]
async fn with_no_admin_settings_the_first_start_generates_one_admin_once(pool: PgPool) {
    crate::common::schema(&pool).await;
    let settings = common::default_settings();
    let generated = admins::bootstrap(&pool, &settings, true)
        .await
        .unwrap()
        .expect("an admin is generated");
    assert_eq!(generated.email, "admin@localhost");
    assert!(generated.password.len() >= 16);
    assert!(
        admins::bootstrap(&pool, &settings, true)
            .await
            .unwrap()
            .is_none(),
        "only the first start"
    );

    let admin = admins::authenticate(&pool, "admin@localhost", &generated.password)
        .await
        .unwrap();
    assert_eq!(admin.map(|a| a.email).as_deref(), Some("admin@localhost"));
}

#[sqlx::test(migrations = false)]
async fn admin_settings_create_that_admin_and_later_change_its_password(pool: PgPool) {
    crate::common::schema(&pool).await;
    let first = common::settings_with(&[
        ("STANDMEET_ADMIN_EMAIL", "Boss@Example.com"),
        ("STANDMEET_ADMIN_PASSWORD", "first password"),
    ]);
    assert!(
        admins::bootstrap(&pool, &first, true)
            .await
            .unwrap()
            .is_none(),
        "nothing generated"
    );
    assert!(
        admins::authenticate(&pool, "boss@example.com", "first password")
            .await
            .unwrap()
            .is_some()
    );

    let second = common::settings_with(&[
        ("STANDMEET_ADMIN_EMAIL", "boss@example.com"),
        ("STANDMEET_ADMIN_PASSWORD", "second password"),
    ]);
    admins::bootstrap(&pool, &second, true).await.unwrap();
    assert!(
        admins::authenticate(&pool, "boss@example.com", "first password")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        admins::authenticate(&pool, "boss@example.com", "second password")
            .await
            .unwrap()
            .is_some()
    );
    let count = common::count(&pool, "SELECT count(*) FROM admins").await;
    assert_eq!(count, 1, "updated, not duplicated");

    // With an admin configured, no admin@localhost appears.
    assert!(
        admins::bootstrap(&pool, &common::default_settings(), true)
            .await
            .unwrap()
            .is_none()
    );
}

#[sqlx::test(migrations = false)]
async fn passwords_are_stored_as_argon2id_hashes(pool: PgPool) {
    crate::common::schema(&pool).await;
    common::create_admin(&pool).await;
    let hash: String = sqlx::query_scalar("SELECT password_hash FROM admins")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(!hash.contains(common::ADMIN_PASSWORD));
}

/// A failed sign-in (each for an email of its own, so no email's backoff slows the
/// test) said to come through a proxy for `forwarded_for`.
async fn wrong_sign_in_via(app: &axum::Router, forwarded_for: &str) -> String {
    static ATTEMPTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("email", &format!("someone{n}@example.com"))
        .append_pair("password", "wrong")
        .finish();
    let reply = common::send(
        app,
        Request::post("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "same-origin")
            .header("x-forwarded-for", forwarded_for)
            .body(Body::from(body))
            .unwrap(),
    )
    .await;
    reply
        .location()
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_string()
}

#[sqlx::test(migrations = false)]
async fn forwarded_addresses_are_believed_only_from_trusted_proxies(pool: PgPool) {
    crate::common::schema(&pool).await;
    // The in-process client (203.0.113.7) is a trusted proxy here: each visitor behind
    // it has limits of their own.
    let behind_proxy = TestApp::builder(pool.clone())
        .setting("STANDMEET_TRUSTED_PROXIES", "203.0.113.0/24")
        .spawn()
        .await;
    for _ in 0..10 {
        assert_eq!(
            wrong_sign_in_via(&behind_proxy, "198.51.100.1").await,
            "/login?error=invalid"
        );
    }
    assert_eq!(
        wrong_sign_in_via(&behind_proxy, "198.51.100.1").await,
        "/login?error=rate_limited"
    );
    assert_eq!(
        wrong_sign_in_via(&behind_proxy, "198.51.100.2").await,
        "/login?error=invalid"
    );

    // Without the setting the header is anybody's claim: the socket's peer counts.
    let direct = TestApp::builder(pool).spawn().await;
    for n in 0..10 {
        assert_eq!(
            wrong_sign_in_via(&direct, &format!("198.51.100.{n}")).await,
            "/login?error=invalid"
        );
    }
    assert_eq!(
        wrong_sign_in_via(&direct, "198.51.100.99").await,
        "/login?error=rate_limited"
    );
}

#[sqlx::test(migrations = false)]
async fn a_session_in_use_slides_its_idle_expiry(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    // As if the session had gone unused for nearly eight hours: two minutes left.
    sqlx::query("UPDATE sessions SET expiry_date = now() + interval '2 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    let left: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM max(expiry_date) - now())::float8 FROM sessions",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        left > 7.9 * 3600.0,
        "used now, so eight hours from now: {left} s left"
    );
    assert!(
        page.session_set_cookie().is_some(),
        "the cookie's lifetime is renewed too"
    );
    // A fresh expiry is not written again on every request.
    let again = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert!(again.session_set_cookie().is_none());
}

#[sqlx::test(migrations = false)]
async fn a_changed_password_ends_the_admins_other_sessions(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = common::signed_in_cookie(&app, &pool).await;
    assert_eq!(
        common::get_with_cookie(&app, "/admin/tasks", &cookie)
            .await
            .status,
        StatusCode::OK
    );
    let email = standmeet::types::EmailAddress::parse(common::ADMIN_EMAIL).unwrap();
    assert!(
        admins::set_password(&pool, &email, "a brand new password")
            .await
            .unwrap()
    );
    let page = common::get_with_cookie(&app, "/admin/tasks", &cookie).await;
    assert_eq!(
        page.status,
        StatusCode::SEE_OTHER,
        "the old session is over"
    );
    // Signing in again, with the new password, works; the old one does not.
    let old = common::sign_in(&app, common::ADMIN_EMAIL, common::ADMIN_PASSWORD).await;
    assert!(old.location().unwrap().starts_with("/login?error=invalid"));
    let new = common::sign_in(&app, common::ADMIN_EMAIL, "a brand new password").await;
    let fresh = new.session_cookie().expect("a new session");
    assert_eq!(
        common::get_with_cookie(&app, "/admin/tasks", &fresh)
            .await
            .status,
        StatusCode::OK
    );
    // The same password given again at a restart ends nothing.
    admins::admin_upsert(&pool, &email, "a brand new password")
        .await
        .unwrap();
    assert_eq!(
        common::get_with_cookie(&app, "/admin/tasks", &fresh)
            .await
            .status,
        StatusCode::OK
    );
}
