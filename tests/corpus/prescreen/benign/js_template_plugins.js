// label: benign
const name = "csv";
const title = `Report for ${name.toUpperCase()} (${new Date(0).toISOString()})`;
console.log(title);
async function loadPlugin(kind) {
  try {
    return await import(`./plugins/${kind}.mjs`);
  } catch {
    return null;
  }
}
loadPlugin(name).then((m) => console.log(m === null ? "no plugin" : "loaded"));
