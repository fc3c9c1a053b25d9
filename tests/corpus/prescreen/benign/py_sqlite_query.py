# label: benign
import sqlite3
con = sqlite3.connect(":memory:")
con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
con.executemany("INSERT INTO t (name) VALUES (?)", [("a",), ("b",)])
print(con.execute("SELECT count(*) FROM t").fetchone()[0])
