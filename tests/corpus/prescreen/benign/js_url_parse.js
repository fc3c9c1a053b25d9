// label: benign
const u = new URL("https://example.com/search?q=node&page=2");
console.log(u.hostname, u.searchParams.get("q"), Number(u.searchParams.get("page")) + 1);
