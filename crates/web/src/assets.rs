//! The page, compiled into the binary: HTML, the page's script, its probe
//! worker and its style sheet. Nothing else is loaded: no CDN, no fonts, no
//! third-party request; the Content-Security-Policy allows only this
//! server. The page is cross-origin isolated (COOP + COEP), so
//! `performance.now()` ticks in 5 us steps, not 100 us.

pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

pub const INDEX: &str = include_str!("../assets/index.html");

pub static ASSETS: &[Asset] = &[
    Asset { path: "/app.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/app.js") },
    Asset { path: "/worker.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/worker.js") },
    Asset { path: "/load.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/load.js") },
    Asset { path: "/style.css", content_type: "text/css; charset=utf-8", body: include_str!("../assets/style.css") },
    Asset { path: "/icon.svg", content_type: "image/svg+xml", body: include_str!("../assets/icon.svg") },
];

/// The page's Content-Security-Policy: scripts, styles, the worker and
/// connections from this origin only (`ws:`/`wss:` to the same host, which
/// 'self' covers in CSP 3), no inline code, no frames, no forms elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; img-src 'self' blob:; \
                       connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Every byte the page loads: HTML, script, worker, style, icon.
pub fn page_weight() -> usize {
    INDEX.len() + ASSETS.iter().map(|a| a.body.len()).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small_and_self_contained() {
        assert!(page_weight() < 100_000, "{} bytes", page_weight());
        for (name, text) in std::iter::once(("index.html", INDEX)).chain(ASSETS.iter().map(|a| (a.path, a.body))) {
            for bad in ["http://", "https://", "//cdn", "<script>", " style=\"", "onclick=", "eval("] {
                // the SVG namespace is the one URL allowed (it is never fetched)
                let hits = text.matches(bad).count() - if bad == "http://" { text.matches("http://www.w3.org/2000/svg").count() } else { 0 };
                assert_eq!(hits, 0, "{name} contains {bad:?}");
            }
        }
        assert!(INDEX.contains("id=\"start\""), "the start button has id `start`");
    }
}
