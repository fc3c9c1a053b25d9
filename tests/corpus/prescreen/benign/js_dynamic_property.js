// label: benign
const handlers = {
  click: (e) => `clicked at ${e.x},${e.y}`,
  key: (e) => `pressed ${e.key}`,
};
const events = [{ type: "click", x: 1, y: 2 }, { type: "key", key: "a" }];
for (const ev of events) {
  const h = handlers[ev.type];
  if (h) console.log(h(ev));
}
const config = { HOST: "localhost", PORT: 8080 };
const field = "port";
console.log(config[field.toUpperCase()]);
console.log(Object.keys(config).map((k) => config[k]).join(":"));
