package qp

// Counters count what a QP did and, above all, what it dropped and why. Drops never
// change a QP's state: malformed or unexpected input is counted and ignored.
type Counters struct {
	TxRequests    uint64 // request packets built, retransmissions included
	TxRetransmits uint64 // request packets sent again (go-back-N)
	TxResponses   uint64 // ACKs, NAKs, read responses and atomic ACKs built

	RxRequests  uint64 // request packets accepted in sequence
	RxDataBytes uint64 // payload of the SEND and RDMA WRITE packets accepted (UD: delivered)
	RxResponses uint64 // responses that advanced the send queue

	Timeouts      uint64 // transport timer expiries that caused a retry
	SeqNAKsRecv   uint64 // PSN sequence error NAKs received
	RNRNAKsRecv   uint64 // RNR NAKs received
	SeqNAKsSent   uint64 // PSN sequence error NAKs sent
	RNRNAKsSent   uint64 // RNR NAKs sent
	ErrorNAKsSent uint64 // invalid request, remote access and remote operational NAKs sent
	DupRequests   uint64 // duplicate requests answered (re-ACK, re-read, atomic replay)
	CoalescedACKs uint64 // ACKs folded into a later ACK before transmission

	DropMalformed   uint64 // frames that failed to decode or whose ICRC did not match
	DropWrongQP     uint64 // packets for another QPN or of another transport
	DropState       uint64 // packets the QP's state does not accept
	DropPKey        uint64 // P_Key mismatch
	DropQKey        uint64 // UD Q_Key mismatch
	DropOpcode      uint64 // opcodes that make no sense here (a response to a responder, ...)
	DropOutOfWindow uint64 // responses outside the outstanding PSN window, or duplicates
	DropNoResource  uint64 // requests dropped for lack of a response slot (retried by the peer)
	DropNoRecvWR    uint64 // UC/UD messages dropped for lack of a receive WR
	DropUCMessage   uint64 // UC packets dropped after a PSN gap or error, up to the next message
}
