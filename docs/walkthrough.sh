# Assumes `privrank serve` is running with PRIVRANK_ADMIN_KEY=change-me in its environment.
# Writes no files: answers are kept in shell variables.
API=${API:-http://127.0.0.1:8000}
ADMIN="Authorization: Bearer ${PRIVRANK_ADMIN_KEY:-change-me}"
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# 1. An admin creates a survey of four items; each respondent may spend at most ε = 10.
SID=$(curl -s -X POST "$API/v1/surveys" -H "$ADMIN" -H 'Content-Type: application/json' -d '{
  "title": "Which policy matters most?", "items": ["Housing", "Transit", "Parks", "Schools"],
  "privacy": {"epsilon_default": 1.0, "epsilon_min": 0.5, "epsilon_max": 3.0, "respondent_budget": 10}}' \
  | json '["id"]')

# 2. A respondent registers (no credentials needed), choosing ε = 2, and gets a token.
TOKEN=$(curl -s -X POST "$API/v1/surveys/$SID/respondents" -H 'Content-Type: application/json' \
  -d '{"epsilon": 2.0}' | json '["token"]')
RESP="Authorization: Bearer $TOKEN"

# 3. It asks for three pairs and answers them (preferring each pair's first item); the
#    server randomizes each answer (flip probability 1/(1+e^2) = 0.12) before storing it.
ANSWERS=$(curl -s "$API/v1/surveys/$SID/pairs?count=3" -H "$RESP" | python3 -c "import json,sys
p = json.load(sys.stdin)['pairs']
print(json.dumps({'privatized': False, 'comparisons': [{'a': x['a'], 'b': x['b'], 'winner': x['a']} for x in p]}))")
curl -s -X POST "$API/v1/surveys/$SID/responses" -H "$RESP" -H 'Content-Type: application/json' \
  -H 'Idempotency-Key: first-batch' -d "$ANSWERS"
echo

# 4. A frontend that randomizes on the device says so, with the ε it used.
PAIR=$(curl -s "$API/v1/surveys/$SID/pairs?count=1" -H "$RESP")
A=$(echo "$PAIR" | json '["pairs"][0]["a"]'); B=$(echo "$PAIR" | json '["pairs"][0]["b"]')
curl -s -X POST "$API/v1/surveys/$SID/responses" -H "$RESP" -H 'Content-Type: application/json' \
  -d "{\"privatized\": true, \"epsilon\": 2.0, \"comparisons\": [{\"a\": \"$A\", \"b\": \"$B\", \"winner\": \"$B\"}]}"
echo

# 5. An admin mints an analyst key; the analyst reads the ranking and exports the data.
ANALYST="Authorization: Bearer $(curl -s -X POST "$API/v1/keys" -H "$ADMIN" | json '["key"]')"
curl -s "$API/v1/surveys/$SID/ranking?k=2" -H "$ANALYST" | python3 -m json.tool
curl -s "$API/v1/surveys/$SID/comparisons.csv" -H "$ANALYST"

# 6. The admin closes the survey: new answers now get 409.
curl -s -X PATCH "$API/v1/surveys/$SID" -H "$ADMIN" -H 'Content-Type: application/json' -d '{"status": "closed"}' \
  | json '["status"]'
