// label: benign
const config = { host: "localhost", port: 8080, opts: { tls: false } };
const { host, port, opts: { tls } } = config;
console.log(`${host}:${port} tls=${tls}`);
