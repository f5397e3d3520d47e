//! Who the client is, by address: the socket's peer, unless that peer is one of the
//! reverse proxies the operator trusts (`STANDMEET_TRUSTED_PROXIES`, CIDRs), in which
//! case the address the proxies say they were called from, in the one header they
//! write (`STANDMEET_TRUSTED_PROXY_HEADER`: `X-Forwarded-For`, or `Forwarded: for=`; the
//! other one is the client's to fill and is not read). Rate limits and logs use this
//! address, so behind a proxy they count visitors, not the proxy; and nobody else can
//! claim an address by sending the header themselves.
//!
//! A proxy on the same host that is not trusted makes every client `127.0.0.1`: one
//! client's failures would lock everybody out, and the loopback-only `/metrics` would
//! answer everyone. So a request from an untrusted loopback peer that carries a
//! forwarded header is marked [`ProxiedFromLoopback`] (`/metrics` refuses it), and the
//! first one is logged as a warning that names the setting.
//!
//! One middleware works it out once per request and puts it in the request's
//! extensions as [`ClientAddress`]; handlers, server functions and tools read it there.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::connect_info::MockConnectInfo;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

use crate::config::ProxyHeader;

/// The client's address for this request (absent when the server runs without socket
/// information, as some tests do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

/// A request from a loopback peer that is not a trusted proxy but says it forwards
/// for someone: a proxy on this host nobody told StandMeet about (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxiedFromLoopback;

/// The proxies whose word on the client's address is taken, and where they write it.
#[derive(Debug, Default)]
pub struct TrustedProxies {
    pub nets: Vec<IpNet>,
    pub header: ProxyHeader,
    /// Whether the warning about an untrusted proxy on this host was logged already.
    warned: std::sync::atomic::AtomicBool,
}

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>, header: ProxyHeader) -> Self {
        TrustedProxies {
            nets,
            header,
            warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether `address` is one of the trusted proxies.
    pub fn trusts(&self, address: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&address))
    }

    /// The client behind `peer`: walking the forwarded addresses from the nearest hop
    /// back, the first one that is not a trusted proxy (the nearest hop that one of
    /// ours did not add). `peer` itself when it is not trusted or says nothing usable.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let hops = forwarded_for(headers, self.header);
        let mut client = peer;
        for hop in hops.iter().rev() {
            client = *hop;
            if !self.trusts(*hop) {
                break;
            }
        }
        client
    }
}

/// Whether the request carries a forwarded header of either kind.
fn says_forwarded(headers: &HeaderMap) -> bool {
    headers.contains_key("x-forwarded-for") || headers.contains_key("forwarded")
}

/// The addresses `header` names (every such header, in order): `X-Forwarded-For`'s, or
/// `Forwarded`'s `for=` parameters; unreadable entries are left out.
fn forwarded_for(headers: &HeaderMap, header: ProxyHeader) -> Vec<IpAddr> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    if header == ProxyHeader::XForwardedFor {
        return values("x-forwarded-for")
            .iter()
            .flat_map(|value| value.split(','))
            .filter_map(|hop| parse_hop(hop.trim()))
            .collect();
    }
    values("forwarded")
        .iter()
        .flat_map(|value| value.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (key, value) = pair.trim().split_once('=')?;
                key.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| parse_hop(value.trim().trim_matches('"')))
                    .flatten()
            })
        })
        .collect()
}

/// One hop: `198.51.100.7`, `198.51.100.7:4711`, `2001:db8::1`, `[2001:db8::1]:4711`.
fn parse_hop(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|socket| socket.ip()))
        .or_else(|| {
            text.strip_prefix('[')
                .and_then(|rest| rest.split(']').next())
                .and_then(|inner| inner.parse().ok())
        })
}

/// Puts the request's [`ClientAddress`] in its extensions.
pub async fn find_client_address(
    State(proxies): State<Arc<TrustedProxies>>,
    mut request: Request,
    next: Next,
) -> Response {
    let extensions = request.extensions();
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip())
        .or_else(|| {
            extensions
                .get::<MockConnectInfo<SocketAddr>>()
                .map(|info| info.0.ip())
        });
    if let Some(peer) = peer {
        if peer.is_loopback() && !proxies.trusts(peer) && says_forwarded(request.headers()) {
            request.extensions_mut().insert(ProxiedFromLoopback);
            if !proxies
                .warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    "a request came through a proxy on this host that StandMeet does not trust: every client behind it counts as {peer}, for the limits on sign-in and requests alike, and /metrics refuses what it forwards; set STANDMEET_TRUSTED_PROXIES={peer} (and STANDMEET_TRUSTED_PROXY_HEADER to the header it writes)"
                );
            }
        }
        let client = proxies.client(peer, request.headers());
        // Every line of the request's span names its client, the access log's too.
        tracing::Span::current().record("client", tracing::field::display(client));
        request.extensions_mut().insert(ClientAddress(client));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn proxies(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            nets.iter().map(|net| net.parse().unwrap()).collect(),
            ProxyHeader::XForwardedFor,
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let proxy: IpAddr = "10.1.2.3".parse().unwrap();
        let stranger: IpAddr = "198.51.100.9".parse().unwrap();
        let claim = headers(&[("x-forwarded-for", "203.0.113.5")]);
        assert_eq!(
            trusted.client(proxy, &claim),
            "203.0.113.5".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            trusted.client(stranger, &claim),
            stranger,
            "anyone can send the header"
        );
        assert_eq!(
            proxies(&[]).client(proxy, &claim),
            proxy,
            "no proxies trusted by default"
        );
    }

    #[test]
    fn the_nearest_untrusted_hop_is_the_client() {
        let trusted = proxies(&["10.0.0.0/8", "2001:db8::/32"]);
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        // The client claimed 1.2.3.4 itself; our proxies added what they saw.
        let chain = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.5, 10.0.0.2")]);
        assert_eq!(
            trusted.client(proxy, &chain),
            "203.0.113.5".parse::<IpAddr>().unwrap()
        );
        let forwarded = headers(&[(
            "forwarded",
            "for=\"[2001:db8::7]:4711\", for=198.51.100.4;proto=https",
        )]);
        let trusted_forwarded = TrustedProxies::new(trusted.nets.clone(), ProxyHeader::Forwarded);
        assert_eq!(
            trusted_forwarded.client(proxy, &forwarded),
            "198.51.100.4".parse::<IpAddr>().unwrap()
        );
        let nonsense = headers(&[("x-forwarded-for", "unknown, not-an-address")]);
        assert_eq!(trusted.client(proxy, &nonsense), proxy);
    }

    #[test]
    fn only_the_header_the_proxies_write_is_read() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        // The proxy writes `Forwarded`; the client adds an `X-Forwarded-For` of its own,
        // which the proxy passes on untouched.
        let request = headers(&[
            ("x-forwarded-for", "203.0.113.66"),
            ("forwarded", "for=198.51.100.4"),
        ]);
        let by_forwarded =
            TrustedProxies::new(vec!["10.0.0.0/8".parse().unwrap()], ProxyHeader::Forwarded);
        assert_eq!(
            by_forwarded.client(proxy, &request),
            "198.51.100.4".parse::<IpAddr>().unwrap()
        );
        // And the other way round.
        let by_x_forwarded = proxies(&["10.0.0.0/8"]);
        let request = headers(&[("forwarded", "for=203.0.113.66")]);
        assert_eq!(by_x_forwarded.client(proxy, &request), proxy);
    }
}
