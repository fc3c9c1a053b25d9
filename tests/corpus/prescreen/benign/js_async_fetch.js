// label: benign
async function main() {
  const res = await fetch("https://api.github.com/repos/nodejs/node");
  const body = await res.json();
  console.log(res.status, body.full_name);
}
main().catch(err => console.error(err.message));
