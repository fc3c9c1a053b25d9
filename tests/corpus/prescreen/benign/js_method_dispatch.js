// label: benign; set: heldout
const api = { getUser: (id) => ({ id }), listUsers: () => [] };
function call(method, ...args) {
  const fn = api[method.charAt(0).toLowerCase() + method.slice(1)];
  return fn ? fn(...args) : undefined;
}
console.log(call("GetUser", 7));
const locale = require("path").join(__dirname, "locales", "en.json");
console.log(locale.endsWith(".json"));
