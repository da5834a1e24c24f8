addHandler('transform', (request, context) => {
  if (request.body.livemode === false) {
    return null; // not for this destination: the event counts as filtered
  }
  return request;
});
