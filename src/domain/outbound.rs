//! Requests StandMeet makes to other servers (job boards, webhook endpoints), and the
//! guard that keeps them off the owner's own network.
//!
//! Whoever may add a job board or a webhook URL could otherwise make StandMeet call
//! addresses only it can reach: the database's port on loopback, a cloud's metadata
//! service on a link-local address, a router on the private network. So unless
//! `STANDMEET_FETCH_ALLOW_PRIVATE=true`, an address that is not public is refused, at
//! two moments:
//!
//! - when the URL is added ([`check_url`]): a name that resolves to such an address, or
//!   such an address written in the URL, is refused with a message;
//! - at every request: the HTTP client resolves names through [`PublicOnlyResolver`],
//!   which drops such addresses, so a name that changed its answer since (DNS
//!   rebinding) reaches nothing; an address written in the URL (which no resolver
//!   sees) is checked by [`refusal`] before the request and on every redirect.

use std::error::Error as StdError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use url::{Host, Url};

/// Whether `ip` is an address on the public internet: not loopback, private, shared
/// (carrier NAT), link-local, unique-local, documentation, benchmarking, multicast,
/// broadcast, reserved or unspecified.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(ip),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier NAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let first = segments[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // An IPv4 address inside: IPv4-compatible (`::a.b.c.d`, deprecated) and
        // IPv4-translated (`::ffff:0:a.b.c.d`) reach the IPv4 host on stacks that map them.
        || segments[..6] == [0; 6]
        || segments[..6] == [0, 0, 0, 0, 0xffff, 0]
        || (first == 0x0100 && segments[1..4] == [0; 3]) // discard-only
        || (first == 0x2001 && segments[1] < 0x0200) // IETF protocol assignments, Teredo
        || first == 0x2002 // 6to4: an IPv4 address inside
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated, still routed inside)
        || (first == 0x2001 && segments[1] == 0x0db8) // documentation
        || (first == 0x0064 && segments[1] == 0xff9b)) // NAT64, well-known and local-use (64:ff9b:1::/48): an IPv4 inside
}

/// The longest URL StandMeet takes for something it will call.
pub const MAX_URL_LEN: usize = 2_000;

/// Reads a URL someone gives StandMeet to call (a job board, a webhook endpoint): not
/// empty (`missing` says what to give), at most [`MAX_URL_LEN`], http or https, with a
/// host. The error is a sentence for the person who typed it.
pub fn parse_http_url(raw: &str, missing: &str) -> Result<Url, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(missing.to_string());
    }
    if raw.len() > MAX_URL_LEN {
        return Err(format!("The URL is longer than {MAX_URL_LEN} characters."));
    }
    let url = Url::parse(raw).map_err(|err| format!("\"{raw}\" is not a URL ({err})."))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "The URL must start with http:// or https:// and name a host; it was \"{raw}\"."
        ));
    }
    Ok(url)
}

/// Why a request to `url` is refused before it is made: an address that is not public
/// written in the URL itself (names are checked when they are resolved). `None` when it
/// may go.
pub fn refusal(url: &Url, allow_private: bool) -> Option<String> {
    if allow_private {
        return None;
    }
    let ip = match url.host()? {
        Host::Ipv4(ip) => IpAddr::V4(ip),
        Host::Ipv6(ip) => IpAddr::V6(ip),
        Host::Domain(name) => {
            // `localhost` needs no resolver to be known as loopback.
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if name == "localhost" || name.ends_with(".localhost") {
                return Some(private_message(url, None));
            }
            return None;
        }
    };
    (!is_public(ip)).then(|| private_message(url, Some(ip)))
}

fn private_message(url: &Url, ip: Option<IpAddr>) -> String {
    let host = url.host_str().unwrap_or("");
    let resolved = match ip {
        Some(ip) if ip.to_string() != host.trim_matches(['[', ']']) => format!(" ({ip})"),
        _ => String::new(),
    };
    format!(
        "{host}{resolved} is a loopback, private or link-local address, which StandMeet does not call \
         (set STANDMEET_FETCH_ALLOW_PRIVATE=true to allow it)"
    )
}

/// Checks a URL someone wants StandMeet to call later: an address written in it, and
/// what its name resolves to now. A name that does not resolve at the moment is let
/// through (the requests will tell); one that resolves to an address that is not
/// public is refused, with a message that says so.
pub async fn check_url(url: &Url, allow_private: bool) -> Result<(), String> {
    if let Some(refused) = refusal(url, allow_private) {
        return Err(refused);
    }
    if allow_private {
        return Ok(());
    }
    let Some(Host::Domain(name)) = url.host() else {
        return Ok(());
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let Ok(addresses) = tokio::net::lookup_host((name, port)).await else {
        return Ok(());
    };
    for address in addresses {
        if !is_public(address.ip()) {
            return Err(private_message(url, Some(address.ip())));
        }
    }
    Ok(())
}

/// A `reqwest` resolver that answers only the public addresses of a name, and fails
/// with [`PrivateAddress`] when it has none.
#[derive(Clone, Copy, Debug, Default)]
pub struct PublicOnlyResolver;

/// A name resolved to loopback, private or link-local addresses only.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} resolves only to loopback, private or link-local addresses, which StandMeet does not call (set STANDMEET_FETCH_ALLOW_PRIVATE=true to allow them)"
)]
pub struct PrivateAddress(pub String);

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|address| is_public(address.ip()))
                .collect();
            if found.is_empty() {
                return Err(Box::new(PrivateAddress(host)) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A client builder for calls to other servers: names resolve through
/// [`PublicOnlyResolver`] unless private addresses are allowed.
/// A proxy named by the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`) is not
/// used then: a proxy resolves names itself, so the guard would see none of them.
pub fn client_builder(allow_private: bool) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    if allow_private {
        builder
    } else {
        builder
            .no_proxy()
            .dns_resolver(Arc::new(PublicOnlyResolver))
    }
}

/// The proxy variables set in this environment, which calls to other servers do not use
/// while private addresses are refused (see [`client_builder`]); said at start.
pub fn ignored_proxy_variables() -> Vec<&'static str> {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .into_iter()
    .filter(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
    .collect()
}

/// The guard's words when `err` (a failed request) was the guard refusing a name.
pub fn guard_refusal(err: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(cause) = source {
        if let Some(private) = cause.downcast_ref::<PrivateAddress>() {
            return Some(private.to_string());
        }
        source = cause.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.9",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "::127.0.0.1",
            "::10.0.0.1",
            "::ffff:0:127.0.0.1",
            "::ffff:0:a9fe:a9fe",
            "64:ff9b:1::a00:1",
            "64:ff9b:1:ffff::7f00:1",
            "100::1",
            "2001::7f00:1",
            "2002:7f00:1::1",
            "2001:db8::1",
        ] {
            assert!(
                !is_public(text.parse().unwrap()),
                "{text} counted as public"
            );
        }
        for text in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(
                is_public(text.parse().unwrap()),
                "{text} counted as private"
            );
        }
    }

    #[test]
    fn addresses_written_in_urls_are_refused_unless_allowed() {
        for text in [
            "http://127.0.0.1:8080/hook",
            "http://[::1]/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:3000/",
            "http://api.localhost/",
        ] {
            let url = Url::parse(text).unwrap();
            let refused = refusal(&url, false).unwrap_or_else(|| panic!("{text} let through"));
            assert!(
                refused.contains("STANDMEET_FETCH_ALLOW_PRIVATE"),
                "{refused}"
            );
            assert_eq!(refusal(&url, true), None);
        }
        assert_eq!(
            refusal(&Url::parse("https://hooks.example.com/x").unwrap(), false),
            None
        );
    }

    #[tokio::test]
    async fn a_proxy_from_the_environment_is_not_used_while_the_guard_is_on() {
        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
        // SAFETY: no other thread of this test reads the environment meanwhile (nextest
        // runs each test in a process of its own).
        unsafe {
            std::env::set_var("HTTP_PROXY", &proxy_url);
            std::env::set_var("http_proxy", &proxy_url);
        }
        assert!(ignored_proxy_variables().contains(&"HTTP_PROXY"));
        let reached_proxy = |client: reqwest::Client| {
            let proxy = &proxy;
            async move {
                let request = client
                    .get("http://93.184.216.34:9/")
                    .timeout(std::time::Duration::from_millis(500))
                    .send();
                let accepted =
                    tokio::time::timeout(std::time::Duration::from_millis(700), proxy.accept());
                let (_, accepted) = tokio::join!(request, accepted);
                accepted.is_ok()
            }
        };
        let guarded = reached_proxy(client_builder(false).build().unwrap()).await;
        // With private addresses allowed the same environment's proxy is used: what
        // shows that this test sees a proxy being used.
        let unguarded = reached_proxy(client_builder(true).build().unwrap()).await;
        // SAFETY: as above, this test's process has no other thread reading the
        // environment.
        unsafe {
            std::env::remove_var("HTTP_PROXY");
            std::env::remove_var("http_proxy");
        }
        assert!(!guarded, "the guarded client went through the proxy");
        assert!(unguarded, "the unguarded client did not use the proxy");
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let url = Url::parse("http://localhost.:9/").unwrap();
        assert!(check_url(&url, false).await.is_err());
        assert!(check_url(&url, true).await.is_ok());
    }
}
