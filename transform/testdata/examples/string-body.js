addHandler('transform', (request, context) => {
  if (typeof request.body === 'string') {
    // Form data: name=value&... becomes JSON.
    const fields = {};
    for (const pair of request.body.split('&')) {
      const [name, value] = pair.split('=').map(decodeURIComponent);
      fields[name] = value;
    }
    request.body = fields;
    request.headers['content-type'] = 'application/json';
  }
  return request;
});
