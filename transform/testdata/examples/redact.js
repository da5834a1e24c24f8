const secret = ['email', 'phone', 'card_number'];

function redact(value) {
  if (Array.isArray(value)) return value.map(redact);
  if (!value || typeof value !== 'object') return value;
  const out = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] = secret.includes(key) ? '[redacted]' : redact(inner);
  }
  return out;
}

addHandler('transform', (request, context) => {
  request.body = redact(request.body);
  return request;
});
