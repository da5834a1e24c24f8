package alert

// Pending is how many dead letters and other lines wait for the next
// notice, and Held how many times the hourly limit held a notice back:
// states a test waits for instead of sleeping.
func (n *Notifier) Pending() (deadLetters, notes int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pending.total, len(n.pending.notes)
}

func (n *Notifier) Held() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.held
}
