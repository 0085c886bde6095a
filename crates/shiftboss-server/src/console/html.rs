//! The page frame, escaping and the one stylesheet and script, all in the binary: nothing is
//! fetched from anywhere else (the console works on a machine with no network).

use std::fmt::Write;

/// Text made safe for HTML content and attribute values.
/// A count as a person reads it: 990,000 rather than 990000.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: the frame (navigation, who is signed in, sign out) around `body`.
pub fn page(title: &str, who: Option<(&str, &str)>, body: &str) -> String {
    let mut nav = String::new();
    if let Some((name, csrf)) = who {
        let _ = write!(
            nav,
            r#"<nav><a href="/">Overview</a><a href="/console/tasks">Tasks</a><a href="/console/workflows">Workflows</a><a href="/console/jobs">Jobs</a><a href="/console/deliveries">Deliveries</a><form class="find" method="get" action="/console/find" role="search"><input name="q" placeholder="Find a task: id, key, correlation id" aria-label="Find a task" size="32"></form><span class="who">{}</span>
<form method="post" action="/console/logout"><input type="hidden" name="csrf" value="{}"><button class="link">Sign out</button></form></nav>"#,
            esc(name),
            esc(csrf)
        );
    }
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{} · shiftboss</title><link rel="stylesheet" href="/console/static/console.css"></head>
<body><header><a class="brand" href="/">shiftboss</a>{nav}</header><main>{body}</main>
<script src="/console/static/console.js" defer></script></body></html>"#,
        esc(title)
    )
}

/// Calm colours, light and dark by the system's choice; readable on a laptop screen.
pub const CSS: &str = r#":root{--bg:#fbfbfa;--fg:#1d2327;--muted:#5f6b73;--line:#dde1e4;--card:#fff;--accent:#2f5d8a;--bad:#a33a2b;--ok:#2e6b3f;--warn:#8a6212}
@media (prefers-color-scheme:dark){:root{--bg:#15191c;--fg:#e3e7ea;--muted:#9aa6ae;--line:#2c3338;--card:#1c2125;--accent:#8db4dc;--bad:#e38b7d;--ok:#8fc79c;--warn:#d9b36a}}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
header{display:flex;align-items:center;gap:1.5rem;padding:.7rem 1.5rem;border-bottom:1px solid var(--line);background:var(--card)}
.brand{font-weight:600;color:var(--fg);text-decoration:none}nav{display:flex;align-items:center;gap:1rem;flex:1}nav .who{margin-left:auto;color:var(--muted)}
nav form{margin:0}nav form.find input{font-size:.9rem}a{color:var(--accent)}main{padding:1.2rem 1.5rem;max-width:1200px}
h1{font-size:1.35rem;margin:.2rem 0 1rem}h2{font-size:1.05rem;margin:1.4rem 0 .5rem}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line)}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:.85rem}code,pre{font:13px/1.4 ui-monospace,Menlo,Consolas,monospace}pre{background:var(--card);border:1px solid var(--line);padding:.6rem;overflow:auto;max-height:20rem}
.state{display:inline-block;padding:0 .45rem;border-radius:.6rem;border:1px solid currentColor;font-size:.85rem}
.s-completed,.s-processed,.s-succeeded{color:var(--ok)}.s-failed,.s-error,.s-terminated,.s-given_up{color:var(--bad)}.s-paused,.s-compensating,.s-cancelled,.s-compensated{color:var(--warn)}.s-running,.s-processing,.s-pending{color:var(--accent)}
.why{background:var(--card);border-left:3px solid var(--warn);padding:.5rem .8rem;margin:.3rem 0}
form.filters{display:flex;flex-wrap:wrap;gap:.6rem;align-items:end;margin-bottom:1rem}label{display:flex;flex-direction:column;font-size:.85rem;color:var(--muted)}
input,select,button{font:inherit;padding:.3rem .5rem;border:1px solid var(--line);border-radius:.3rem;background:var(--card);color:var(--fg)}
button{cursor:pointer;border-color:var(--accent);color:var(--accent)}button.link{border:none;background:none;padding:0;color:var(--accent)}
button.danger{border-color:var(--bad);color:var(--bad)}.actions{display:flex;flex-wrap:wrap;gap:.5rem}.actions form{margin:0}
.muted{color:var(--muted)}.error{color:var(--bad)}.cards{display:flex;flex-wrap:wrap;gap:.8rem}.card{background:var(--card);border:1px solid var(--line);padding:.6rem .9rem;min-width:8rem}
.card{text-decoration:none;color:inherit}.card b{display:block;font-size:1.4rem}td.t{white-space:nowrap}:focus-visible{outline:2px solid var(--accent);outline-offset:2px}
nav.tabs{flex:none;margin:0 0 .8rem}nav.tabs a[aria-current]{color:var(--fg);font-weight:600;text-decoration:none;border-bottom:2px solid var(--accent)}
ol.steps{list-style:none;margin:0;padding:0}ol.steps>li+li::before{content:"\2193";display:block;text-align:center;color:var(--muted);line-height:1.2}
.node{background:var(--card);border:1px solid var(--line);border-left:3px solid var(--accent);border-radius:.35rem;padding:.4rem .65rem}
.node:not(.k-agent){border-left-color:var(--muted)}.node .kind{font-size:.8rem;color:var(--muted)}.node .what{font-size:.9rem}
.branches{display:flex;flex-wrap:wrap;gap:.6rem;margin-top:.5rem}.branch{flex:1;min-width:13rem;border-top:2px dashed var(--line);padding-top:.3rem}
.branch>.label{font-size:.8rem;color:var(--muted);margin-bottom:.2rem}details{margin-top:1rem}
.node.st-processed{border-left-color:var(--ok)}.node.st-error{border-left-color:var(--bad)}.node.st-pending,.node.st-processing{border-left-color:var(--accent)}
.node.st-cancelled{border-left-color:var(--warn)}.node.st-none{opacity:.55}
details.timeline{margin:.3rem 0}details.timeline ol{margin:.3rem 0 .6rem;padding-left:1.4rem}details.timeline li{margin:.15rem 0}
.chart{display:inline-block;vertical-align:top;margin:0 1.2rem .6rem 0}.chart svg{display:block;background:var(--card);border:1px solid var(--line)}
.chart polyline{fill:none;stroke:var(--accent);stroke-width:1.5}.chart circle{fill:var(--accent)}.chart line{stroke:var(--line)}
.chart.errors polyline{stroke:var(--bad)}.chart.errors circle{fill:var(--bad)}.chart .cap{font-size:.85rem;color:var(--muted);max-width:360px}
"#;

/// The live part: a page that names a stream (`data-stream`) reloads its content when an event
/// of it arrives, a little later so that a burst is one reload; what the reader opened (a
/// `details` with an id) stays open. Same-origin, so the session cookie goes with it; no library.
/// Times a step counts towards (`time[data-at]`, a complete-by) say every second how far they are.
pub const JS: &str = r#"(function(){
  function left(){ var now=Date.now(); document.querySelectorAll('time[data-at]').forEach(function(t){
    var s=t.nextElementSibling; if(!s||!s.classList.contains('left')) return;
    var d=Math.round((parseInt(t.getAttribute('data-at'),10)-now)/1000), a=Math.abs(d);
    var w=a<120?a+' s':a<7200?Math.round(a/60)+' min':Math.round(a/3600)+' h';
    s.textContent=d>=0?'(in '+w+')':'('+w+' ago)'; }); }
  left(); setInterval(left,1000);
  var el=document.querySelector('[data-stream]'); if(!el||!window.EventSource) return;
  var timer=null, es=new EventSource(el.getAttribute('data-stream'));
  function refresh(){ timer=null; fetch(location.href,{credentials:'same-origin'}).then(function(r){return r.text();}).then(function(t){
    var d=new DOMParser().parseFromString(t,'text/html'), fresh=d.querySelector('[data-live]'), old=document.querySelector('[data-live]');
    if(!fresh||!old) return;
    old.querySelectorAll('details[id]').forEach(function(o){ var f=o.open&&fresh.querySelector('details[id="'+o.id+'"]'); if(f) f.open=true; });
    old.replaceWith(fresh); }); }
  es.onmessage=function(){}; es.addEventListener('error',function(){});
  // A browser holds few connections per server (six over HTTP/1.1): a page left for another
  // gives its stream back, and one brought back from the history cache loads afresh.
  window.addEventListener('pagehide',function(){ es.close(); if(timer){ clearTimeout(timer); timer=null; } });
  window.addEventListener('pageshow',function(e){ if(e.persisted) location.reload(); });
  ['task.completed','task.failed','task.received','step.processed','step.claimed','step.error','step.resubmitted','task.resumed','task.paused','task.cancelled','task.operated','step.scheduled','task.terminated','task.compensated','delivery.dead']
    .forEach(function(k){ es.addEventListener(k,function(){ if(!timer) timer=setTimeout(refresh,150); }); });
})();"#;

#[cfg(test)]
mod tests {
    #[test]
    fn counts_are_grouped_by_thousands() {
        let shown: Vec<String> = [0, 7, 999, 1000, 10_000, 990_000, 1_234_567].into_iter().map(super::count).collect();
        assert_eq!(shown, ["0", "7", "999", "1,000", "10,000", "990,000", "1,234,567"]);
    }
}
